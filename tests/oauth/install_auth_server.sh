#!/usr/bin/env bash
# The loopback OAuth authorization server's npm packages (oauth2-mock-server, pinned by the lock file in
# tests/oauth/auth_server/) into .tools/oauth/ at the repository root (ignored by git): `npm ci` of exactly
# that lock, nothing global. tests/oauth/auth_server/server.mjs loads them from there.
# Idempotent and quiet: exits at once when .tools/oauth holds the same lock, installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=tests/oauth/auth_server
DEST=.tools/oauth
NPM=${NPM:-npm}

installed() {
  [ -f "$DEST/node_modules/oauth2-mock-server/package.json" ] \
    && [ -f "$DEST/node_modules/.package-lock.json" ] \
    && cmp -s "$SRC/package.json" "$DEST/package.json" \
    && cmp -s "$SRC/package-lock.json" "$DEST/package-lock.json"
}

installed && exit 0
command -v "$NPM" >/dev/null 2>&1 || { echo "install_auth_server.sh: npm not found (Node.js 20.19+ with npm)" >&2; exit 1; }
mkdir -p "$DEST"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
(cd "$DEST" && "$NPM" ci --no-audit --no-fund --loglevel=error >/dev/null)
installed || { echo "install_auth_server.sh: oauth2-mock-server missing from $DEST after npm ci" >&2; exit 1; }
