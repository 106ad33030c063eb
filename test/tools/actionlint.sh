#!/usr/bin/env bash
# actionlint (checks .github/workflows/*.yml), built once from the Go module
# proxy and cached as $STACK_DIR/bin/actionlint-$VERSION; nothing is started.
# shellcheck (Debian) is installed beside it: actionlint runs it on every
# `run:` script when it is in the PATH.
# Usage: actionlint.sh install|path|version|run [ARGS...]
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_ACTIONLINT_VERSION:-v1.7.12}
DIR=$STACK_DIR/actionlint
BIN=$STACK_DIR/bin/actionlint-$VERSION

install() {
  # apt may be busy with another install: retry for a few minutes.
  local i=0
  until (apt_install shellcheck); do
    i=$((i + 1)); [ "$i" -ge 60 ] && die "actionlint: apt-get install shellcheck failed (see above)"
    log "actionlint: apt is busy or failed, retrying in 5s ($i/60)"
    sleep 5
  done
  [ -x "$BIN" ] && return 0
  stack_lock actionlint
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin" "$DIR/gobin"
  log "actionlint: building $VERSION from the Go module proxy"
  CGO_ENABLED=0 GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "github.com/rhysd/actionlint/cmd/actionlint@$VERSION"
  mv "$DIR/gobin/actionlint" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
  log "actionlint: installed $BIN"
}

case "${1:-}" in
  install) install; echo "$BIN" ;;
  path) echo "$BIN" ;;
  version) install; "$BIN" -version ;;
  run) shift; install; exec "$BIN" "$@" ;;
  stop) ;;
  status) [ -x "$BIN" ] ;;
  *) echo "usage: $0 install|path|version|run|stop|status" >&2; exit 2 ;;
esac
