#!/usr/bin/env bash
# RabbitMQ for tests and the demo: Debian's rabbitmq-server, run as a private
# node (own HOME, node name, ports, data) bound to 127.0.0.1.
# Usage: rabbitmq.sh install|start|stop|status|env
source "$(dirname "$0")/lib.sh"

PORT=${DBCANARY_RABBITMQ_PORT:-5672}
DIST_PORT=${DBCANARY_RABBITMQ_DIST_PORT:-25680} # not 25672 (a system broker) nor 35672-35682 (rabbitmqctl)
# AMQPS: a TLS listener on TLS_PORT with ca.pem, server.pem and server-key.pem
# of TLS_DIR (tests make them); TLS_VERIFY=peer also requires a client certificate.
TLS_PORT=${DBCANARY_RABBITMQ_TLS_PORT:-}
TLS_DIR=${DBCANARY_RABBITMQ_TLS_DIR:-}
TLS_VERIFY=${DBCANARY_RABBITMQ_TLS_VERIFY:-none}
DIR=$STACK_DIR/rabbitmq
PIDFILE=$DIR/rabbitmq.pid
USER_NAME=dbcanary
SBIN=/usr/lib/rabbitmq/bin

export HOME=$DIR/home
export RABBITMQ_NODENAME=${DBCANARY_RABBITMQ_NODENAME:-dbcanary@localhost} # tests that stop a broker run their own node
export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
export RABBITMQ_NODE_PORT=$PORT
export RABBITMQ_DIST_PORT=$DIST_PORT
export ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_CONFIG_FILE=$DIR/rabbitmq.conf
export RABBITMQ_ADVANCED_CONFIG_FILE=$DIR/advanced.config
export RABBITMQ_MNESIA_BASE=$DIR/mnesia
export RABBITMQ_LOG_BASE=$DIR/log
export RABBITMQ_PID_FILE=$PIDFILE
export RABBITMQ_ENABLED_PLUGINS_FILE=$DIR/enabled_plugins

install() {
  [ -x "$SBIN/rabbitmq-server" ] || apt_install rabbitmq-server
}

configure() {
  mkdir -p "$HOME" "$RABBITMQ_MNESIA_BASE" "$RABBITMQ_LOG_BASE"
  local pass; pass=$(secret "$DIR/password")
  cat > "$RABBITMQ_CONFIG_FILE" <<CONF
listeners.tcp.default = 127.0.0.1:$PORT
default_user = $USER_NAME
default_pass = $pass
default_vhost = /
loopback_users = none
log.file.level = info
log.console = false
CONF
  if [ -n "$TLS_PORT" ]; then
    [ -f "$TLS_DIR/server.pem" ] || die "rabbitmq: DBCANARY_RABBITMQ_TLS_PORT needs ca.pem, server.pem and server-key.pem in DBCANARY_RABBITMQ_TLS_DIR"
    cat >> "$RABBITMQ_CONFIG_FILE" <<CONF
listeners.ssl.default = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $TLS_DIR/ca.pem
ssl_options.certfile = $TLS_DIR/server.pem
ssl_options.keyfile = $TLS_DIR/server-key.pem
ssl_options.versions.1 = tlsv1.2
ssl_options.versions.2 = tlsv1.3
CONF
    if [ "$TLS_VERIFY" = peer ]; then
      printf 'ssl_options.verify = verify_peer\nssl_options.fail_if_no_peer_cert = true\n' >> "$RABBITMQ_CONFIG_FILE"
    else
      printf 'ssl_options.verify = verify_none\nssl_options.fail_if_no_peer_cert = false\n' >> "$RABBITMQ_CONFIG_FILE"
    fi
  fi
  echo '[{kernel, [{inet_dist_use_interface, {127,0,0,1}}]}].' > "$RABBITMQ_ADVANCED_CONFIG_FILE"
  echo '[].' > "$RABBITMQ_ENABLED_PLUGINS_FILE"
}

start() {
  install
  if pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; then log "rabbitmq: already running"; return 0; fi
  if port_open 127.0.0.1 "$PORT"; then die "rabbitmq: port $PORT is taken by another process (set DBCANARY_RABBITMQ_PORT)"; fi
  configure
  log "rabbitmq: starting on 127.0.0.1:$PORT"
  "$SBIN/rabbitmq-server" -detached >/dev/null 2>&1 9>&-
  if ! "$SBIN/rabbitmqctl" wait "$PIDFILE" --timeout 90 >/dev/null 2>&1 ||
     ! "$SBIN/rabbitmqctl" await_startup --timeout 90 >/dev/null 2>&1 ||
     ! wait_port 127.0.0.1 "$PORT" 30 "$PIDFILE" ||
     { [ -n "$TLS_PORT" ] && ! wait_port 127.0.0.1 "$TLS_PORT" 30 "$PIDFILE"; }; then
    tail -n 30 "$RABBITMQ_LOG_BASE"/*.log 2>/dev/null >&2 || true
    die "rabbitmq: did not start (logs above, under $RABBITMQ_LOG_BASE)"
  fi
  log "rabbitmq: ready (pid $(cat "$PIDFILE"))"
}

# The node starts Erlang's epmd on first use and leaves it running: stop it too
# once no node is registered (epmd -kill refuses while any node, ours or
# another test's, is alive), so stack-down leaves no process behind.
stop() {
  stop_pid "$PIDFILE" rabbitmq 30
  if command -v epmd >/dev/null && epmd -names >/dev/null 2>&1 && epmd -kill >/dev/null 2>&1; then
    log "rabbitmq: epmd stopped (no node left)"
  fi
}

status() { pid_alive "$PIDFILE" && port_open 127.0.0.1 "$PORT"; }

env_() {
  echo "DBCANARY_TEST_RABBITMQ_URL=amqp://127.0.0.1:$PORT/"
  echo "DBCANARY_TEST_RABBITMQ_USER=$USER_NAME"
  echo "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE=$DIR/password"
  echo "DBCANARY_TEST_RABBITMQ_PORT=$PORT"
  if [ -n "$TLS_PORT" ]; then echo "DBCANARY_TEST_RABBITMQ_TLS_URL=amqps://127.0.0.1:$TLS_PORT/"; fi
}

case "${1:-}" in
  install) stack_lock rabbitmq; install ;;
  start) stack_lock rabbitmq; start ;;
  stop) stack_lock rabbitmq; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
