#!/usr/bin/env bash
# uPlot (MIT, a small time-series chart library) for test/tools/boardshot,
# which draws a board's panels in headless Chromium: the npm package's tarball,
# fetched with `npm pack` from the npm registry, checked against the pinned
# sha512 below and unpacked into $STACK_DIR/uplot-$VERSION. Never committed to
# the repository, never loaded from a CDN: boardshot serves these files itself.
# Usage: uplot.sh install|path (path prints the directory holding
# uPlot.iife.min.js and uPlot.min.css; a tool: nothing is started)
source "$(dirname "$0")/../stack/lib.sh"

VERSION=1.6.32
# npm's dist.integrity of uplot@1.6.32 (`npm view uplot@1.6.32 dist.integrity`).
INTEGRITY=sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw==
DIR=$STACK_DIR/uplot-$VERSION
DIST=$DIR/package/dist

install() {
  [ -s "$DIST/uPlot.iife.min.js" ] && [ -s "$DIST/uPlot.min.css" ] && return 0
  command -v npm >/dev/null || apt_install npm
  local tmp tgz got
  tmp=$(mktemp -d "$STACK_DIR/uplot-pack.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  log "uplot: npm pack uplot@$VERSION"
  (cd "$tmp" && npm pack --silent "uplot@$VERSION" >/dev/null)
  tgz=$tmp/uplot-$VERSION.tgz
  [ -s "$tgz" ] || die "uplot: npm pack uplot@$VERSION wrote no $tgz"
  got=sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
  [ "$got" = "$INTEGRITY" ] || die "uplot: $tgz has integrity $got, want $INTEGRITY"
  rm -rf "$DIR" && mkdir -p "$DIR"
  tar -xzf "$tgz" -C "$DIR"
  [ -s "$DIST/uPlot.iife.min.js" ] || die "uplot: no dist/uPlot.iife.min.js in the package"
  log "uplot: $VERSION in $DIR"
}

case "${1:-}" in
  install) stack_lock uplot; install ;;
  path) echo "$DIST" ;;
  *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
