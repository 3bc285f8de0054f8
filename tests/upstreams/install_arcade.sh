#!/usr/bin/env bash
# Install a real Arcade worker (arcade-serve + the arcade-math toolkit) into .venv-arcade,
# apart from the gateway's own environment: Arcade pins its own dependency versions.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.venv-arcade
PYTHON=${PYTHON:-python3}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import arcade_serve, arcade_math" 2>/dev/null; then
  exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "arcade-serve>=3.6,<4" "arcade-math>=1.3"
