#!/usr/bin/env bash
# Toxiproxy (TCP fault proxy) for fault tests: built from the Go module proxy
# (v2.12.0 pinned: @latest resolves to an old release), API on 127.0.0.1:8474.
# Usage: toxiproxy.sh install|start|stop|status|env
source "$(dirname "$0")/lib.sh"

VERSION=v2.12.0
PORT=${DBCANARY_TOXIPROXY_PORT:-8474}
DIR=$STACK_DIR/toxiproxy
BIN=$STACK_DIR/bin/toxiproxy-server-$VERSION
PIDFILE=$DIR/toxiproxy.pid

install() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin" "$DIR/gobin"
  log "toxiproxy: building $VERSION from the Go module proxy"
  GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION"
  mv "$DIR/gobin/server" "$BIN"
}

start() {
  install
  if pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; then log "toxiproxy: already running"; return 0; fi
  mkdir -p "$DIR"
  nohup "$BIN" -host 127.0.0.1 -port "$PORT" >"$DIR/toxiproxy.log" 2>&1 9>&- &
  echo $! > "$PIDFILE"
  wait_port 127.0.0.1 "$PORT" 20 "$PIDFILE" || { cat "$DIR/toxiproxy.log" >&2; die "toxiproxy: did not start"; }
  log "toxiproxy: ready on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
}

stop() { stop_pid "$PIDFILE" toxiproxy 10; }
status() { pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; }
env_() { echo "DBCANARY_TEST_TOXIPROXY_ADDR=127.0.0.1:$PORT"; }

case "${1:-}" in
  install) stack_lock toxiproxy; install ;;
  start) stack_lock toxiproxy; start ;;
  stop) stack_lock toxiproxy; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
