#!/usr/bin/env bash
# pint (Prometheus rule linter, github.com/cloudflare/pint) built from the Go
# module proxy and cached as $STACK_DIR/bin/pint-$VERSION. `go install
# ...@v0.60.0` fails here (the proxy serves that version but not the module's
# version list, which go install reads for deprecations), so the module zip is
# downloaded and ./cmd/pint built in a writable copy with the module's own go.sum.
# `run` lints the generated rules offline with the committed .pint.hcl.
# Usage: pint.sh install|run [pint lint args...]|path (a tool: nothing is started)
# do nothing: the Makefile's stack loops call every script with them)
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_PINT_VERSION:-v0.60.0}
MODULE=github.com/cloudflare/pint
BIN=$STACK_DIR/bin/pint-$VERSION
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

install() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin"
  log "pint: building $VERSION from the Go module proxy"
  local dir build
  dir=$(cd "$STACK_DIR" && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || die "pint: go mod download $MODULE@$VERSION gave no directory"
  build=$(mktemp -d "$STACK_DIR/pint-build.XXXXXX")
  trap 'rm -rf "$build"' RETURN
  cp -R "$dir/." "$build/" && chmod -R u+w "$build"
  (cd "$build" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X main.version=$VERSION" -o "$BIN.tmp" ./cmd/pint)
  mv "$BIN.tmp" "$BIN"
}

run() {
  install
  cd "$ROOT"
  if [ $# -eq 0 ]; then set -- alerts/dbcanary-rules.yml; fi
  "$BIN" --no-color --offline --config .pint.hcl lint --fail-on=warning "$@"
}

case "${1:-}" in
  install) install ;;
  run) shift; run "$@" ;;
  path) echo "$BIN" ;;
  *) echo "usage: $0 install|run [files...]|path" >&2; exit 2 ;;
esac
