#!/usr/bin/env bash
# Helm (chart rendering for deploy tests), built once from the Go module proxy
# and cached as $STACK_DIR/bin/helm-$VERSION; nothing is started.
# Usage: helm.sh install|path|version (stop and status are no-ops for `make stack-down`)
source "$(dirname "$0")/lib.sh"

VERSION=${DBCANARY_HELM_VERSION:-v3.22.0}
DIR=$STACK_DIR/helm
BIN=$STACK_DIR/bin/helm-$VERSION

install() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin" "$DIR/gobin"
  log "helm: building $VERSION from the Go module proxy (a few minutes)"
  # CGO off: a static helm needs no system libraries.
  CGO_ENABLED=0 GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$VERSION"
  mv "$DIR/gobin/helm" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
  log "helm: installed $BIN"
}

case "${1:-}" in
  install) install; echo "$BIN" ;;
  path) echo "$BIN" ;;
  version) install; "$BIN" version --short ;;
  stop) ;;
  status) [ -x "$BIN" ] ;;
  *) echo "usage: $0 install|path|version|stop|status" >&2; exit 2 ;;
esac
