#!/usr/bin/env bash
# dashboard-linter (Grafana's board linter, github.com/grafana/dashboard-linter)
# built from the Go module proxy and cached as
# $STACK_DIR/bin/dashboard-linter-$VERSION. The module has no tags, only a
# pseudo-version; it is not in the checksum database (GONOSUMDB), and
# `go install ...@<pseudo-version>` fails here (the proxy serves the version but
# not the module's version list), so the module zip is downloaded and built in a
# writable copy with the module's own go.sum. `run` lints every board in
# dashboards/ with the committed dashboards/.lint (--strict: warnings fail too).
# Usage: dashboard-linter.sh install|run [board.json...]|path (a tool: nothing is started)
# do nothing: the Makefile's stack loops call every script with them)
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_DASHBOARD_LINTER_VERSION:-v0.0.0-20241224134444-1765d94aec4a}
MODULE=github.com/grafana/dashboard-linter
BIN=$STACK_DIR/bin/dashboard-linter-$VERSION
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$MODULE

install() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin"
  log "dashboard-linter: building $VERSION from the Go module proxy (a few minutes cold)"
  local dir build
  dir=$(cd "$STACK_DIR" && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || die "dashboard-linter: go mod download $MODULE@$VERSION gave no directory"
  build=$(mktemp -d "$STACK_DIR/dashboard-linter-build.XXXXXX")
  trap 'rm -rf "$build"' RETURN
  cp -R "$dir/." "$build/" && chmod -R u+w "$build"
  (cd "$build" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" .)
  mv "$BIN.tmp" "$BIN"
}

run() {
  install
  cd "$ROOT"
  if [ $# -eq 0 ]; then set -- dashboards/*.json; fi
  local f out rc=0
  for f in "$@"; do
    # The linter reads the .lint file beside each board. It prints its rule
    # list on every run: show only the findings.
    if ! out=$("$BIN" lint --strict "$f" 2>&1); then
      printf '%s\n' "$out" | grep -v -e '^Checks that' -e 'OK$' >&2 || true
      log "dashboard-linter: $f fails (above)"; rc=1
    fi
  done
  [ $rc -eq 0 ] && log "dashboard-linter: $# boards clean"
  return $rc
}

case "${1:-}" in
  install) install ;;
  run) shift; run "$@" ;;
  path) echo "$BIN" ;;
  *) echo "usage: $0 install|run [board.json...]|path" >&2; exit 2 ;;
esac
