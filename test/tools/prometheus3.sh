#!/usr/bin/env bash
# Prometheus 3.x and its promtool, built once from the module source and
# cached as $STACK_DIR/bin/prometheus-3.x and $STACK_DIR/bin/promtool-3.x
# (`go install` refuses the module: it has replace directives). About 6 min
# cold on 2 cores, nothing when the binaries are there. Nothing is started:
# `make test-compat` runs promtool 3 on the shipped rules.
# Usage: prometheus3.sh install|path|promtool-path|version|promtool ARGS...|status
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_PROMETHEUS3_VERSION:-v0.315.0}
DIR=$STACK_DIR/prometheus3
BIN=$STACK_DIR/bin/prometheus-3.x
PROMTOOL=$STACK_DIR/bin/promtool-3.x
STAMP=$STACK_DIR/bin/prometheus-3.x.version

installed() {
  [ -x "$BIN" ] && [ -x "$PROMTOOL" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION" ]
}

install() {
  installed && return 0
  stack_lock prometheus3
  installed && return 0
  mkdir -p "$STACK_DIR/bin" "$DIR"
  log "prometheus3: downloading github.com/prometheus/prometheus@$VERSION from the Go module proxy"
  local src
  src=$(cd "$DIR" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus/prometheus@$VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$src" ] && [ -d "$src" ] || die "prometheus3: go mod download gave no source directory"
  # The module cache is read-only: build in a copy.
  rm -rf "$DIR/src"
  cp -r "$src" "$DIR/src"
  chmod -R u+w "$DIR/src"
  # The module's v0.3MM.P is Prometheus 3.MM.P: stamp it so --version says so.
  local minor=${VERSION#v0.3} patch=${VERSION##*.}
  minor=$((10#${minor%%.*}))
  log "prometheus3: building promtool and prometheus 3.$minor.$patch (about 6 min cold)"
  (cd "$DIR/src" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod go build \
    -ldflags "-X github.com/prometheus/common/version.Version=3.$minor.$patch -X github.com/prometheus/common/version.Branch=$VERSION" \
    -o "$DIR/out/" ./cmd/promtool ./cmd/prometheus)
  mv "$DIR/out/promtool" "$PROMTOOL.tmp" && mv "$PROMTOOL.tmp" "$PROMTOOL"
  mv "$DIR/out/prometheus" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
  echo "$VERSION" >"$STAMP"
  rm -rf "$DIR/src" "$DIR/out"
  log "prometheus3: installed $BIN and $PROMTOOL"
}

case "${1:-}" in
  install) install; echo "$PROMTOOL" ;;
  path) echo "$BIN" ;;
  promtool-path) echo "$PROMTOOL" ;;
  version) install; "$PROMTOOL" --version ;;
  promtool) shift; install; exec "$PROMTOOL" "$@" ;;
  stop) ;;
  status) installed ;;
  *) echo "usage: $0 install|path|promtool-path|version|promtool ARGS...|stop|status" >&2; exit 2 ;;
esac
