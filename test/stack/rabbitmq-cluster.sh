#!/usr/bin/env bash
# A RabbitMQ cluster of DBCANARY_RABBITMQ_NODES nodes (default 3) for the
# node-fault tests (test/clusters, docs/clusters.md): node i runs rabbitmq.sh
# (Debian's rabbitmq-server) as dbcanary-c<i>@localhost with its own stack
# folder $STACK_DIR/rabbitmq-cluster/node<i>, AMQP port BASE+i on 127.0.0.1,
# Erlang distribution port DIST_BASE+i, one Erlang cookie for all; nodes 2..N
# join node 1 once (rabbitmqctl join_cluster) and rejoin by themselves after a
# restart. The single node of rabbitmq.sh (5672) is not touched.
# With DBCANARY_RABBITMQ_CLUSTER_TLS_DIR (ca.pem, server.pem, server-key.pem
# for 127.0.0.1, made by the test) every node also listens for AMQPS on
# TLS_BASE+i (DBCANARY_RABBITMQ_CLUSTER_TLS_PORT_BASE, default 15900).
# Usage: rabbitmq-cluster.sh install|start|stop|status|env
source "$(dirname "$0")/lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
NODES=${DBCANARY_RABBITMQ_NODES:-3}
PORT_BASE=${DBCANARY_RABBITMQ_CLUSTER_PORT_BASE:-15800}
DIST_BASE=${DBCANARY_RABBITMQ_CLUSTER_DIST_PORT_BASE:-25800} # not 25672, not 35672-35682 (rabbitmqctl)
CDIR=$STACK_DIR/rabbitmq-cluster
TLS_DIR=${DBCANARY_RABBITMQ_CLUSTER_TLS_DIR:-}
TLS_BASE=${DBCANARY_RABBITMQ_CLUSTER_TLS_PORT_BASE:-15900}
SBIN=/usr/lib/rabbitmq/bin

[[ "$NODES" =~ ^[1-9]$ ]] || die "rabbitmq-cluster: DBCANARY_RABBITMQ_NODES must be 1-9, not $NODES"

name() { echo "dbcanary-c$1@localhost"; }

# node N ACTION: rabbitmq.sh for node N of the cluster.
node() {
  local i=$1; shift
  DBCANARY_STACK_DIR=$CDIR/node$i \
  DBCANARY_RABBITMQ_NODENAME=$(name "$i") \
  DBCANARY_RABBITMQ_PORT=$((PORT_BASE + i)) \
  DBCANARY_RABBITMQ_DIST_PORT=$((DIST_BASE + i)) \
  DBCANARY_RABBITMQ_TLS_PORT=$([ -n "$TLS_DIR" ] && echo $((TLS_BASE + i))) \
  DBCANARY_RABBITMQ_TLS_DIR=$TLS_DIR \
  bash "$HERE/rabbitmq.sh" "$@"
}

# ctl N ARGS: rabbitmqctl against node N, with that node's HOME (its cookie).
ctl() {
  local i=$1; shift
  HOME=$CDIR/node$i/rabbitmq/home ERL_EPMD_ADDRESS=127.0.0.1 "$SBIN/rabbitmqctl" -n "$(name "$i")" "$@"
}

install() { bash "$HERE/rabbitmq.sh" install; }

# cookie: one Erlang cookie in every node's HOME (created once).
cookie() {
  local c i
  c=$(secret "$CDIR/erlang.cookie" | tr -dc 'A-Za-z0-9')
  for i in $(seq 1 "$NODES"); do
    mkdir -p "$CDIR/node$i/rabbitmq/home"
    if [ "$(cat "$CDIR/node$i/rabbitmq/home/.erlang.cookie" 2>/dev/null)" != "$c" ]; then
      rm -f "$CDIR/node$i/rabbitmq/home/.erlang.cookie"
      printf '%s' "$c" > "$CDIR/node$i/rabbitmq/home/.erlang.cookie"
      chmod 400 "$CDIR/node$i/rabbitmq/home/.erlang.cookie"
    fi
  done
}

# since T0: seconds (one decimal) since T0 (date +%s%N).
since() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

start() {
  install
  cookie
  local i t0 pid rss total0
  total0=$(date +%s%N)
  for i in $(seq 1 "$NODES"); do
    if node "$i" status; then continue; fi
    t0=$(date +%s%N)
    node "$i" start
    if [ "$i" -gt 1 ] && [ ! -e "$CDIR/node$i/joined" ]; then
      ctl "$i" stop_app >>"$CDIR/node$i/join.log" 2>&1
      ctl "$i" reset >>"$CDIR/node$i/join.log" 2>&1
      ctl "$i" join_cluster "$(name 1)" >>"$CDIR/node$i/join.log" 2>&1 || die "rabbitmq-cluster: node $i could not join $(name 1)"
      ctl "$i" start_app >>"$CDIR/node$i/join.log" 2>&1
      ctl "$i" await_startup --timeout 90 >>"$CDIR/node$i/join.log" 2>&1
      touch "$CDIR/node$i/joined"
    fi
    pid=$(cat "$CDIR/node$i/rabbitmq/rabbitmq.pid")
    rss=$(( $(ps -o rss= -p "$pid") / 1024 ))
    log "rabbitmq-cluster: node $i ($(name "$i"), 127.0.0.1:$((PORT_BASE + i))) ready in $(since "$t0"), RSS ${rss} MiB"
  done
  log "rabbitmq-cluster: $NODES nodes ready in $(since "$total0")"
}

stop() {
  local i
  for i in $(seq "$NODES" -1 1); do node "$i" stop || true; done
}

status() {
  local i
  for i in $(seq 1 "$NODES"); do node "$i" status || return 1; done
}

env_() {
  local urls="" i
  for i in $(seq 1 "$NODES"); do urls+="${urls:+,}amqp://127.0.0.1:$((PORT_BASE + i))/"; done
  echo "DBCANARY_TEST_RABBITMQ_URLS=$urls"
  if [ -n "$TLS_DIR" ]; then
    urls=""
    for i in $(seq 1 "$NODES"); do urls+="${urls:+,}amqps://127.0.0.1:$((TLS_BASE + i))/"; done
    echo "DBCANARY_TEST_RABBITMQ_TLS_URLS=$urls"
    echo "DBCANARY_TEST_RABBITMQ_CA_FILE=$TLS_DIR/ca.pem"
  fi
  echo "DBCANARY_TEST_RABBITMQ_USER=dbcanary"
  echo "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE=$CDIR/node1/rabbitmq/password"
  echo "DBCANARY_TEST_RABBITMQ_NODES=$NODES"
  for i in $(seq 1 "$NODES"); do
    echo "DBCANARY_TEST_RABBITMQ_NODE${i}_PIDFILE=$CDIR/node$i/rabbitmq/rabbitmq.pid"
    echo "DBCANARY_TEST_RABBITMQ_NODE${i}_NAME=$(name "$i")"
  done
}

case "${1:-}" in
  install) stack_lock rabbitmq-cluster; install ;;
  start) stack_lock rabbitmq-cluster; start ;;
  stop) stack_lock rabbitmq-cluster; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
