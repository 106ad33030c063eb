#!/usr/bin/env bash
# govulncheck (Go vulnerability scanner) from the Go module proxy, installed
# into $STACK_DIR/bin/govulncheck-$VERSION like staticcheck. Scanning needs the
# vulnerability database at vuln.go.dev (or GOVULNDB): `run` says so plainly
# when it cannot be reached instead of reporting a clean scan.
# Usage: govulncheck.sh install|run [packages...]|path (a tool: nothing is started)
# do nothing: the Makefile's stack loops call every script with them)
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_GOVULNCHECK_VERSION:-v1.1.4}
BIN=$STACK_DIR/bin/govulncheck-$VERSION
GOBIN_DIR=$STACK_DIR/gobin-govulncheck

install() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin" "$GOBIN_DIR"
  log "govulncheck: building $VERSION from the Go module proxy"
  GOBIN=$GOBIN_DIR GOFLAGS=-mod=mod go install "golang.org/x/vuln/cmd/govulncheck@$VERSION"
  mv "$GOBIN_DIR/govulncheck" "$BIN"
}

run() {
  install
  local db=${GOVULNDB:-https://vuln.go.dev}
  case "$db" in
    http://*|https://*)
      if ! curl -fsS --max-time 10 -o /dev/null "$db/index/db.json.gz" 2>/dev/null; then
        die "govulncheck: the vulnerability database $db is not reachable: scan NOT performed (set GOVULNDB=file:///path/to/mirror to scan offline)"
      fi ;;
  esac
  cd "$(dirname "$0")/../.."
  "$BIN" -db "$db" "${@:-./...}"
}

case "${1:-}" in
  install) install ;;
  run) shift; run "$@" ;;
  path) echo "$BIN" ;;
  *) echo "usage: $0 install|run [packages...]|path" >&2; exit 2 ;;
esac
