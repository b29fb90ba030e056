# Sourced by .ci/inspector.sh and .ci/conformance.sh: what both do before their client runs, in
# one place. A work folder (removed on exit, with the processes started here), a config on the
# test-sized models (`deno task fixtures`) in production mode (X-MCP-Token required, as behind
# the CDN), a write key made with `deno task keys`, and the server over streamable HTTP on a
# free loopback port. Uses DATABASE_URL when set (CI's throwaway cluster), else the embedded
# database in the work folder.
#
# Sets: $work, $config, $secret; ci_key sets $key; ci_start_server sets $server_pid, $url and
# $server_port. Every function returns 1 after saying why on stderr.

work=$(mktemp -d)
# Searchable by the `postgres` user that runs the embedded database when this runs as root.
chmod 711 "$work"
config="$work/config.toml"
secret="ci-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
server_pid=""
# Processes a script adds (a relay) go here, so that one trap stops them all.
ci_pids=()
ci_cleanup() {
  local pid
  for pid in "$server_pid" "${ci_pids[@]}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap ci_cleanup EXIT

# The config; $1 (optional): lines appended to its [server] table.
ci_write_config() {
  cat >"$config" <<TOML
[server]
environment = "production"       # X-MCP-Token required, as behind the CDN
data_dir = "$work/data"
${1:-}

[models]
root = "$(pwd)/tests/fixtures/tiny/models"
lock = "$(pwd)/tests/fixtures/tiny/models.lock"

[runtime]
intra_op_threads = 1
inter_op_threads = 1

[generation]
preset = "quality"               # the tiny set has no LCM LoRA for the CPU's default fast preset
steps = 4
TOML
}

# The test-sized models the config names.
ci_fixtures() {
  deno task fixtures >/dev/null 2>&1 || { echo "deno task fixtures failed" >&2; return 1; }
}

# A write key for project 1; $1: its name. Sets $key.
ci_key() {
  key=$(deno task --quiet keys create --config "$config" --project 1 --user 1 --permission write \
    --name "$1" 2>"$work/keys.log" | tail -n 1)
  case "$key" in
    guinness_*) ;;
    *) cat "$work/keys.log" >&2; echo "deno task keys create printed no key" >&2; return 1 ;;
  esac
}

# The server over HTTP on a free port; waits (60 s at most) for its "listening on" line.
ci_start_server() {
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
  [ -n "$url" ] || { cat "$work/http.log" >&2; echo "HTTP server did not start" >&2; return 1; }
  server_port=$(sed -E 's#.*:([0-9]+)/mcp#\1#' <<<"$url")
}
