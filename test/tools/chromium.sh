#!/usr/bin/env bash
# Chromium for the status page's browser tests: Debian's `chromium` package
# (/usr/bin/chromium), installed with apt when missing. Nothing is started and
# nothing else is cached; each test run gives Chromium a fresh --user-data-dir.
# Usage: chromium.sh install|path (a tool: nothing is started)
source "$(dirname "$0")/../stack/lib.sh"

BIN=/usr/bin/chromium

install() {
  [ -x "$BIN" ] && return 0
  apt_install chromium
  [ -x "$BIN" ] || die "chromium: $BIN missing after apt-get install chromium"
  log "chromium: installed ($("$BIN" --version 2>/dev/null || echo "version unknown"))"
}

case "${1:-}" in
  install) stack_lock chromium; install ;;
  path) echo "$BIN" ;;
  *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
