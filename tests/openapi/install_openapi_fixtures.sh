#!/usr/bin/env bash
# The OpenAPI tests' npm packages, pinned by the lock file in tests/openapi/fixtures/, into .tools/openapi/ at
# the repository root (ignored by git): `npm ci` of exactly that lock, nothing global.
#   @readme/oas-examples  Swagger 2.0, OpenAPI 3.0 and 3.1 example documents (2.0/, 3.0/, 3.1/ in json and yaml)
#   @octokit/openapi      GitHub's REST API document (generated/api.github.com.json); the other variants
#                         (GHEC, GHES, dereferenced copies: ~370 MB) are deleted after the install
#   @stoplight/prism-cli  `prism mock <document>`: a mock server answering as a document says
#   swagger2openapi       the reference Swagger 2.0 -> OpenAPI 3 converter (tests compare ours with it)
# No install scripts run (the only one is @scarf/scarf's download counter). tests/openapi/fixtures.py reads them.
# Idempotent and quiet: exits at once when .tools/openapi holds the same lock, installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=tests/openapi/fixtures
DEST=.tools/openapi
NPM=${NPM:-npm}
OCTOKIT=node_modules/@octokit/openapi/generated

installed() {
  [ -f "$DEST/node_modules/@readme/oas-examples/package.json" ] \
    && [ -f "$DEST/$OCTOKIT/api.github.com.json" ] \
    && [ -f "$DEST/node_modules/@stoplight/prism-cli/package.json" ] \
    && [ -f "$DEST/node_modules/swagger2openapi/package.json" ] \
    && [ -f "$DEST/node_modules/.package-lock.json" ] \
    && cmp -s "$SRC/package.json" "$DEST/package.json" \
    && cmp -s "$SRC/package-lock.json" "$DEST/package-lock.json"
}

installed && exit 0
command -v "$NPM" >/dev/null 2>&1 || { echo "install_openapi_fixtures.sh: npm not found (Node.js 20.19+ with npm)" >&2; exit 1; }
mkdir -p "$DEST"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
(cd "$DEST" && SCARF_ANALYTICS=false "$NPM" ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
find "$DEST/$OCTOKIT" -maxdepth 1 -type f -name '*.json' ! -name api.github.com.json -delete
installed || { echo "install_openapi_fixtures.sh: packages missing from $DEST after npm ci" >&2; exit 1; }
