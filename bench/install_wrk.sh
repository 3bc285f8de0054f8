#!/bin/sh
# wrk, the load generator of `make bench`, from Debian's package when it is missing.
# Without it (no apt-get, no root), `make bench` still runs, with its own slower asyncio client.
set -e
command -v wrk >/dev/null 2>&1 && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "wrk is not installed and there is no apt-get: install wrk to measure beyond what a Python client can send" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  command -v sudo >/dev/null 2>&1 || { echo "installing wrk needs root (apt-get install wrk)" >&2; exit 1; }
  SUDO="sudo -n"
fi
$SUDO apt-get install -y -q wrk >/dev/null 2>&1 || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q wrk >/dev/null; }
command -v wrk >/dev/null 2>&1
