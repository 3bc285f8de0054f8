#!/bin/sh
# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned) and the Node.js
# it needs (>= 22, newer than the sidecar's 20), both into .tools/ at the repository root (ignored by
# git): nothing global, nothing under /usr. Node comes from the npm registry as the package that
# ships the binary for this machine (node-linux-<arch>), so the system's npm is the only requirement.
# Idempotent and quiet: exits at once when both are there at the pinned versions.
set -e
cd "$(dirname "$0")/../.."
TOOLS=.tools
SUITE=@modelcontextprotocol/conformance
SUITE_VERSION=0.2.0-alpha.12
NODE_MAJOR=22
NPM=${NPM:-npm}

case "$(uname -m)" in
  x86_64 | amd64) ARCH=x64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  armv7l) ARCH=armv7l ;;
  ppc64le) ARCH=ppc64le ;;
  s390x) ARCH=s390x ;;
  *) echo "install_conformance.sh: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac
[ "$(uname -s)" = Linux ] || { echo "install_conformance.sh: Linux only (node-linux-$ARCH)" >&2; exit 1; }

NODE="$TOOLS/node_modules/node-linux-$ARCH/bin/node"
SUITE_JSON="$TOOLS/node_modules/$SUITE/package.json"

installed() {
  [ -x "$NODE" ] && [ -f "$SUITE_JSON" ] || return 1
  major=$("$NODE" -p 'process.versions.node.split(".")[0]' 2>/dev/null) || return 1
  [ "$major" -ge "$NODE_MAJOR" ] || return 1
  [ "$("$NODE" -p "require('./$SUITE_JSON').version")" = "$SUITE_VERSION" ]
}

installed && exit 0
command -v "$NPM" >/dev/null 2>&1 || { echo "install_conformance.sh: npm not found (Node.js 20+ with npm)" >&2; exit 1; }
mkdir -p "$TOOLS"
# A package.json of its own, so npm installs here and not into a parent project.
[ -f "$TOOLS/package.json" ] || printf '{"name": "toolplex-tools", "private": true}\n' >"$TOOLS/package.json"
"$NPM" install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
  "node-linux-$ARCH@$NODE_MAJOR" "$SUITE@$SUITE_VERSION" >/dev/null
installed || { echo "install_conformance.sh: $NODE or $SUITE@$SUITE_VERSION missing after npm install" >&2; exit 1; }
