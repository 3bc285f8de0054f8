#!/bin/sh
# Debian's chromium for the console's browser tests (tests/console/test_browser.py drives it with Playwright,
# which never downloads a browser of its own), when /usr/bin/chromium is missing. Without apt-get or root
# it says so and exits 0: the browser tests then skip, saying why.
CHROMIUM=/usr/bin/chromium
[ -x "$CHROMIUM" ] && exit 0
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
  if [ "$(id -u)" = "0" ] || [ -n "$SUDO" ]; then
    $SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
      || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null; } \
      || true
    [ -x "$CHROMIUM" ] && exit 0
  fi
fi
echo "chromium could not be installed (Debian's package, needs apt-get and root or sudo -n):" \
  "the console's browser tests (tests/console/test_browser.py) will be skipped" >&2
exit 0
