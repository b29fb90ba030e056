#!/usr/bin/env bash
# The MCP conformance suite (@modelcontextprotocol/conformance, pinned in .ci/node_tools.sh)
# against the real server over streamable HTTP, once per protocol revision the server serves:
# `--requirements 2026-07-28` (stateless, per-request `_meta`, `server/discover`) and
# `--requirements 2025-11-25` (the `initialize` handshake). Each run is exactly the scenarios the
# revision requires, plus the ones it runs without scoring (the tasks extension, pending ones),
# and the whole suite output goes to the log. Every check must pass except those the suite
# cannot run against this server (its own fixture tools, prompts and resources), which are
# listed with the reason in .ci/conformance_not_applicable.txt.
#
# The suite takes only a URL, and this server wants an API key (and the X-MCP-Token of a
# deployment behind the CDN) on every request: .ci/key_relay.ts, a loopback TCP relay, adds
# them and passes everything else through unchanged, Host and Origin included, so the DNS
# rebinding checks see what the suite sent. The relay's origin is the one allowed origin.
#
# Uses DATABASE_URL when set (CI's throwaway cluster), else the embedded database in a
# temporary folder. Prints "conformance: N passed, N failed" last (one per revision) and exits 1
# if a revision failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# shellcheck source=node_tools.sh
source .ci/node_tools.sh

passed=0
failed=0
finish() {
  echo "conformance: $passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
  exit $?
}
ci_node_tools || { failed=$((failed + 1)); finish; }

# shellcheck source=test_server.sh
source .ci/test_server.sh
ci_fixtures || { failed=1; finish; }
# The relay first: the server's allowed origins name its port. The suite is one client opening
# a connection per request, both eras back to back (its 2025-11-25 SSE polling scenario met the
# default 50/s, burst 100); the limit itself is tested in tests/http_refusals_test.ts.
conformance_config() { # $1: the relay's port (its origins are allowed)
  ci_write_config "allowed_origins = [\"http://localhost:$1\", \"http://127.0.0.1:$1\"]
client_connections_per_second = 1000"
}
: >"$work/server-port"
conformance_config 0
ci_key conformance-ci || { failed=1; finish; }
RELAY_HEADERS="MCP-API-Key: $key
X-MCP-Token: $secret" deno run --allow-net=127.0.0.1 --allow-read="$work" \
  --allow-env=RELAY_HEADERS .ci/key_relay.ts "$work/server-port" >"$work/relay.log" 2>&1 &
ci_pids+=($!)
relay_port=""
for _ in $(seq 1 60); do
  relay_port=$(grep -oE 'relay listening on [0-9]+' "$work/relay.log" | grep -oE '[0-9]+$')
  [ -n "$relay_port" ] && break
  sleep 0.5
done
[ -n "$relay_port" ] || { cat "$work/relay.log" >&2; echo "the relay did not start" >&2; failed=1; finish; }
conformance_config "$relay_port"
ci_start_server || { failed=1; finish; }
echo "$server_port" >"$work/server-port"
url="http://localhost:$relay_port/mcp"
echo "conformance: the server on port $server_port, through the key relay at $url" >&2

# Judges one run's results: every FAILURE must be listed as not applicable to this server.
judge() { # $1 revision, $2 results folder
  "$node" -e '
    const fs = require("fs");
    const path = require("path");
    const [revision, dir, listFile] = process.argv.slice(1);
    const exempt = new Map();
    for (const raw of fs.readFileSync(listFile, "utf8").split("\n")) {
      const [spec, reason = ""] = raw.split("#");
      const [rev, scenario, check] = spec.trim().split(/\s+/);
      if (rev === revision && scenario) exempt.set(`${scenario} ${check}`, reason.trim());
    }
    const notApplicable = (scenario, check) =>
      exempt.get(`${scenario} ${check}`) ??
        (check === "wire-schema-valid" ? undefined : exempt.get(`${scenario} *`));
    let bad = 0;
    for (const entry of fs.readdirSync(dir).sort()) {
      const scenario = entry.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT.*$/, "");
      const checks = JSON.parse(fs.readFileSync(path.join(dir, entry, "checks.json"), "utf8"));
      const failures = checks.filter((c) => c.status === "FAILURE");
      const unexpected = failures.filter((c) => notApplicable(scenario, c.id) === undefined);
      const ok = checks.filter((c) => c.status === "SUCCESS").length;
      const na = failures.length - unexpected.length;
      for (const c of unexpected) {
        bad++;
        console.error(`conformance ${revision} FAILED: ${scenario} ${c.id}: ${c.errorMessage ?? c.description}`);
      }
      if (unexpected.length) continue;
      const reasons = [...new Set(failures.map((c) => notApplicable(scenario, c.id)))].join("; ");
      if (ok === 0 && na > 0) {
        console.error(`conformance ${revision} not applicable: ${scenario} (${reasons})`);
      } else {
        console.error(`conformance ${revision} ok: ${scenario} (${ok} passed` +
          (na ? `, ${na} not applicable: ${reasons})` : ")"));
      }
    }
    process.exit(bad ? 1 : 0);
  ' "$1" "$2" "$root/.ci/conformance_not_applicable.txt"
}

for revision in 2026-07-28 2025-11-25; do
  results="$work/results-$revision"
  echo "=== conformance --requirements $revision ===" >&2
  # Its own exit status counts the not-applicable checks too: judge() decides.
  "$node" "$conformance_dir/dist/index.js" server --url "$url" --requirements "$revision" \
    --output-dir "$results" >&2
  if [ -d "$results" ] && judge "$revision" "$results"; then
    echo "conformance ok: every applicable $revision check passes" >&2
    passed=$((passed + 1))
  else
    echo "conformance FAILED: $revision" >&2
    failed=$((failed + 1))
  fi
done
finish
