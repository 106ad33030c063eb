#!/usr/bin/env bash
# A Cassandra cluster of DBCANARY_CASSANDRA_NODES nodes (default 3) for the
# node-fault tests (test/clusters, docs/clusters.md): node i runs cassandra.sh
# (same version and classpath cache) on the loopback alias 127.0.0.i, with its
# own stack folder $STACK_DIR/cassandra-cluster/node<i>, JMX off, node 1 the
# seed, no bootstrap streaming (a new, empty cluster) and no authentication
# (system_auth would need a repair after its replication change, and there is
# no nodetool without JMX). Drivers reach node i only through a private
# toxiproxy listening on 127.0.0.(10+i): the node advertises that address
# (broadcast_rpc_address), so a test can slow or cut one node as the driver
# sees it. The single node of cassandra.sh (127.0.0.1:9042) is not touched.
# Usage: cassandra-cluster.sh install|start|stop|status|env|stop-node N
source "$(dirname "$0")/lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
NODES=${DBCANARY_CASSANDRA_NODES:-3}
PORT=${DBCANARY_CASSANDRA_CLUSTER_PORT:-19342}
STORAGE_PORT=${DBCANARY_CASSANDRA_CLUSTER_STORAGE_PORT:-17300}
HEAP_MIN=${DBCANARY_CASSANDRA_CLUSTER_HEAP_MIN:-256M}
HEAP_MAX=${DBCANARY_CASSANDRA_CLUSTER_HEAP_MAX:-512M}
TOXIPROXY_PORT=${DBCANARY_CASSANDRA_CLUSTER_TOXIPROXY_PORT:-18774}
CDIR=$STACK_DIR/cassandra-cluster
VERSION=$(sed -n 's/^VERSION=//p' "$HERE/cassandra.sh")

[[ "$NODES" =~ ^[1-9]$ ]] || die "cassandra-cluster: DBCANARY_CASSANDRA_NODES must be 1-9, not $NODES"

# node N ACTION: cassandra.sh for node N of the cluster.
node() {
  local i=$1; shift
  DBCANARY_STACK_DIR=$CDIR/node$i \
  DBCANARY_CASSANDRA_SHARED_DIR=$STACK_DIR/cassandra-$VERSION \
  DBCANARY_CASSANDRA_LISTEN=127.0.0.$i \
  DBCANARY_CASSANDRA_PORT=$PORT \
  DBCANARY_CASSANDRA_STORAGE_PORT=$STORAGE_PORT \
  DBCANARY_CASSANDRA_SEEDS=127.0.0.1:$STORAGE_PORT \
  DBCANARY_CASSANDRA_BROADCAST_RPC_ADDRESS=127.0.0.$((10 + i)) \
  DBCANARY_CASSANDRA_AUTO_BOOTSTRAP=false \
  DBCANARY_CASSANDRA_CLUSTER_NAME=dbcanary-cluster \
  DBCANARY_CASSANDRA_AUTH=false \
  DBCANARY_CASSANDRA_HEAP_MIN=$HEAP_MIN \
  DBCANARY_CASSANDRA_HEAP_MAX=$HEAP_MAX \
  bash "$HERE/cassandra.sh" "$@"
}

toxiproxy() {
  DBCANARY_STACK_DIR=$CDIR DBCANARY_TOXIPROXY_PORT=$TOXIPROXY_PORT bash "$HERE/toxiproxy.sh" "$@"
}

install() {
  command -v curl >/dev/null || apt_install curl ca-certificates
  bash "$HERE/cassandra.sh" install
  bash "$HERE/toxiproxy.sh" install
  # The private toxiproxy uses the binary built for the default stack.
  mkdir -p "$CDIR"
  if [ -d "$CDIR/bin" ] && [ ! -L "$CDIR/bin" ]; then rm -rf "$CDIR/bin"; fi
  ln -sfn "$STACK_DIR/bin" "$CDIR/bin"
}

# proxies: one per node, 127.0.0.(10+i):PORT -> 127.0.0.i:PORT (created or updated).
proxies() {
  local json="[" i
  for i in $(seq 1 "$NODES"); do
    [ "$i" -gt 1 ] && json+=","
    json+="{\"name\":\"cassandra-node$i\",\"listen\":\"127.0.0.$((10 + i)):$PORT\",\"upstream\":\"127.0.0.$i:$PORT\",\"enabled\":true}"
  done
  json+="]"
  curl -fsS -X POST -H 'Content-Type: application/json' --data "$json" "http://127.0.0.1:$TOXIPROXY_PORT/populate" >/dev/null \
    || die "cassandra-cluster: could not create the toxiproxy proxies"
}

# since T0: seconds (one decimal) since T0 (date +%s%N).
since() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

start() {
  install
  toxiproxy start
  proxies
  local i t0 pid rss total0
  total0=$(date +%s%N)
  # The seed first, then the others one at a time: each joins a ring that is up.
  for i in $(seq 1 "$NODES"); do
    if node "$i" status; then continue; fi
    t0=$(date +%s%N)
    node "$i" start
    pid=$(cat "$CDIR/node$i/cassandra/cassandra.pid")
    rss=$(( $(ps -o rss= -p "$pid") / 1024 ))
    log "cassandra-cluster: node $i (127.0.0.$i, drivers via 127.0.0.$((10 + i)):$PORT) ready in $(since "$t0"), RSS ${rss} MiB"
  done
  log "cassandra-cluster: $NODES nodes ready in $(since "$total0")"
}

stop() {
  local i
  for i in $(seq "$NODES" -1 1); do node "$i" stop || true; done
  toxiproxy stop
}

status() {
  local i
  toxiproxy status || return 1
  for i in $(seq 1 "$NODES"); do node "$i" status || return 1; done
}

env_() {
  local hosts="" i
  for i in $(seq 1 "$NODES"); do hosts+="${hosts:+,}127.0.0.$((10 + i))"; done
  echo "DBCANARY_TEST_CASSANDRA_HOSTS=$hosts"
  echo "DBCANARY_TEST_CASSANDRA_PORT=$PORT"
  echo "DBCANARY_TEST_CASSANDRA_DC=datacenter1"
  echo "DBCANARY_TEST_CASSANDRA_NODES=$NODES"
  echo "DBCANARY_TEST_TOXIPROXY_ADDR=127.0.0.1:$TOXIPROXY_PORT"
  for i in $(seq 1 "$NODES"); do
    echo "DBCANARY_TEST_CASSANDRA_NODE${i}_PIDFILE=$CDIR/node$i/cassandra/cassandra.pid"
    echo "DBCANARY_TEST_CASSANDRA_NODE${i}_PROXY=cassandra-node$i"
    echo "DBCANARY_TEST_CASSANDRA_NODE${i}_LOG=$CDIR/node$i/cassandra/logs/system.log"
  done
}

case "${1:-}" in
  install) stack_lock cassandra-cluster; install ;;
  start) stack_lock cassandra-cluster; start ;;
  stop) stack_lock cassandra-cluster; stop ;;
  stop-node) stack_lock cassandra-cluster; [[ "${2:-}" =~ ^[1-9]$ ]] || die "usage: $0 stop-node N"; node "$2" stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env|stop-node N" >&2; exit 2 ;;
esac
