#!/usr/bin/env bash
# Alertmanager for the end-to-end alert test: Debian's prometheus-alertmanager
# (0.25), a single private node on 127.0.0.1 with clustering off.
# Usage: alertmanager.sh install|start|stop|status|env
#   Alerts are read back through /api/v2/alerts; the one receiver sends nowhere.
#   start reads its config from $DBCANARY_ALERTMANAGER_CONFIG when set (the
#   cluster tests: the shipped routing and inhibition, receivers on their webhook).
source "$(dirname "$0")/lib.sh"

PORT=${DBCANARY_ALERTMANAGER_PORT:-19093} # not 9093: leave a real Alertmanager alone
DIR=$STACK_DIR/alertmanager
PIDFILE=$DIR/alertmanager.pid
BIN=/usr/bin/prometheus-alertmanager

install() {
  [ -x "$BIN" ] || apt_install prometheus-alertmanager
}

configure() {
  mkdir -p "$DIR"
  if [ -n "${DBCANARY_ALERTMANAGER_CONFIG:-}" ]; then
    cp "$DBCANARY_ALERTMANAGER_CONFIG" "$DIR/alertmanager.yml"
    return
  fi
  cat > "$DIR/alertmanager.yml" <<CONF
route:
  receiver: blackhole
  group_by: [alertname, target, op]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: blackhole
CONF
}

start() {
  install
  if pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; then log "alertmanager: already running"; return 0; fi
  if port_open 127.0.0.1 "$PORT"; then die "alertmanager: port $PORT is taken by another process (set DBCANARY_ALERTMANAGER_PORT)"; fi
  configure
  rm -rf "$DIR/data"
  log "alertmanager: starting on 127.0.0.1:$PORT"
  # Empty --cluster.listen-address: no gossip listener on 0.0.0.0:9094.
  nohup "$BIN" --config.file="$DIR/alertmanager.yml" --storage.path="$DIR/data" \
    --web.listen-address="127.0.0.1:$PORT" --cluster.listen-address= \
    >"$DIR/alertmanager.log" 2>&1 9>&- &
  echo $! > "$PIDFILE"
  wait_port 127.0.0.1 "$PORT" 30 "$PIDFILE" || { tail -n 30 "$DIR/alertmanager.log" >&2; die "alertmanager: did not start"; }
  log "alertmanager: ready on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
}

stop() { stop_pid "$PIDFILE" alertmanager 20; }
status() { pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; }
env_() { echo "DBCANARY_TEST_ALERTMANAGER_URL=http://127.0.0.1:$PORT"; }

case "${1:-}" in
  install) stack_lock alertmanager; install ;;
  start) stack_lock alertmanager; start ;;
  stop) stack_lock alertmanager; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
