#!/usr/bin/env bash
# GoReleaser (the release build, .goreleaser.yaml), built once from the Go
# module proxy and cached as $STACK_DIR/bin/goreleaser-$VERSION; nothing is
# started. v2.15.1 is the newest the proxy serves that builds with our Go
# (v2.18 and later need a newer Go and dependencies the proxy refuses).
# Usage: goreleaser.sh install|path|version (stop and status for `make stack-down`-style loops)
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_GORELEASER_VERSION:-v2.15.1}
DIR=$STACK_DIR/goreleaser
BIN=$STACK_DIR/bin/goreleaser-$VERSION

install() {
  [ -x "$BIN" ] && return 0
  stack_lock goreleaser
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin" "$DIR/gobin"
  log "goreleaser: building $VERSION from the Go module proxy (minutes cold)"
  CGO_ENABLED=0 GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "github.com/goreleaser/goreleaser/v2@$VERSION"
  mv "$DIR/gobin/goreleaser" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
  log "goreleaser: installed $BIN"
}

case "${1:-}" in
  install) install; echo "$BIN" ;;
  path) echo "$BIN" ;;
  version) install; "$BIN" --version ;;
  stop) ;;
  status) [ -x "$BIN" ] ;;
  *) echo "usage: $0 install|path|version|stop|status" >&2; exit 2 ;;
esac
