#!/bin/sh
# The reference MCP server npm @modelcontextprotocol/server-everything (pinned), for the stdio upstream
# tests of the `mcp` backend, into .tools/npm at the repository root (ignored by git): nothing global.
# Its package declares no engines; it runs on the machine's Node.js 20+, whose npm installs it.
# Idempotent and quiet: exits at once when the pinned version is there.
set -e
cd "$(dirname "$0")/../../.."
PREFIX=.tools/npm
PACKAGE=@modelcontextprotocol/server-everything
VERSION=2026.8.31
NPM=${NPM:-npm}
PACKAGE_JSON="$PREFIX/node_modules/$PACKAGE/package.json"

installed() {
  [ -f "$PACKAGE_JSON" ] && [ "$(node -p "require('./$PACKAGE_JSON').version" 2>/dev/null)" = "$VERSION" ]
}

installed && exit 0
command -v "$NPM" >/dev/null 2>&1 || { echo "install_everything.sh: npm not found (Node.js 20+ with npm)" >&2; exit 1; }
mkdir -p "$PREFIX"
# A package.json of its own, so npm installs here and not into a parent project.
[ -f "$PREFIX/package.json" ] || printf '{"name": "toolplex-npm-tools", "private": true}\n' >"$PREFIX/package.json"
"$NPM" install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "$PACKAGE@$VERSION" >/dev/null
installed || { echo "install_everything.sh: $PACKAGE@$VERSION missing after npm install" >&2; exit 1; }
