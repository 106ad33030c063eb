#!/usr/bin/env bash
# Prometheus and promtool for rule tests and the end-to-end alert test: Debian's
# prometheus package (2.42), run as a private server bound to 127.0.0.1.
# Usage: prometheus.sh install|start|stop|status|env
#   start reads its scrape/rule config from $DBCANARY_PROMETHEUS_CONFIG when set
#   (copied to $DIR/prometheus.yml), else serves an empty config; reload with
#   POST /-/reload. The TSDB is wiped at each start: it is a test instance.
source "$(dirname "$0")/lib.sh"

PORT=${DBCANARY_PROMETHEUS_PORT:-19090} # not 9090: leave a real Prometheus alone
DIR=$STACK_DIR/prometheus
PIDFILE=$DIR/prometheus.pid
BIN=/usr/bin/prometheus
PROMTOOL=/usr/bin/promtool

install() {
  { [ -x "$BIN" ] && [ -x "$PROMTOOL" ]; } || apt_install prometheus
  [ -x "$PROMTOOL" ] || die "prometheus: promtool missing after install"
}

configure() {
  mkdir -p "$DIR"
  if [ -n "${DBCANARY_PROMETHEUS_CONFIG:-}" ]; then
    cp "$DBCANARY_PROMETHEUS_CONFIG" "$DIR/prometheus.yml"
  elif [ ! -s "$DIR/prometheus.yml" ]; then
    printf 'global:\n  scrape_interval: 15s\n' > "$DIR/prometheus.yml"
  fi
}

start() {
  install
  if pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; then log "prometheus: already running"; return 0; fi
  if port_open 127.0.0.1 "$PORT"; then die "prometheus: port $PORT is taken by another process (set DBCANARY_PROMETHEUS_PORT)"; fi
  configure
  rm -rf "$DIR/data"
  log "prometheus: starting on 127.0.0.1:$PORT"
  # Classic buckets only: with --enable-feature=native-histograms, 2.42 drops the
  # classic _bucket series the generated rules read.
  nohup "$BIN" --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/data" \
    --web.listen-address="127.0.0.1:$PORT" --web.enable-lifecycle \
    ${DBCANARY_PROMETHEUS_FLAGS:-} >"$DIR/prometheus.log" 2>&1 9>&- &
  echo $! > "$PIDFILE"
  wait_port 127.0.0.1 "$PORT" 30 "$PIDFILE" || { tail -n 30 "$DIR/prometheus.log" >&2; die "prometheus: did not start"; }
  log "prometheus: ready on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
}

stop() { stop_pid "$PIDFILE" prometheus 20; }
status() { pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; }

env_() {
  echo "DBCANARY_TEST_PROMETHEUS_URL=http://127.0.0.1:$PORT"
  echo "DBCANARY_TEST_PROMETHEUS_CONFIG=$DIR/prometheus.yml"
  echo "DBCANARY_TEST_PROMTOOL=$PROMTOOL"
}

case "${1:-}" in
  install) stack_lock prometheus; install ;;
  start) stack_lock prometheus; start ;;
  stop) stack_lock prometheus; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
