#!/usr/bin/env bash
# An OpenSearch cluster of DBCANARY_OPENSEARCH_NODES nodes (default 3) for the
# node-fault tests (test/clusters, docs/clusters.md): every node runs the tree
# opensearch.sh installs (same version, no security plugin) with a config of
# its own: cluster dbcanary-cluster, node os<i>, HTTP on 127.0.0.1:PORT_BASE+i,
# transport on TRANSPORT_BASE+i, discovery by seed hosts (every node
# cluster-manager eligible), heap HEAP, its own stack folder
# $STACK_DIR/opensearch-cluster/node<i>, run as opensearch.sh's unprivileged
# user and stopped by PID. Data is wiped when the whole cluster starts. The single node of opensearch.sh (9200) is not touched.
# Usage: opensearch-cluster.sh install|start|stop|status|env
source "$(dirname "$0")/lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
NODES=${DBCANARY_OPENSEARCH_NODES:-3}
PORT_BASE=${DBCANARY_OPENSEARCH_CLUSTER_PORT_BASE:-19200}
TRANSPORT_BASE=${DBCANARY_OPENSEARCH_CLUSTER_TRANSPORT_BASE:-19300}
HEAP=${DBCANARY_OPENSEARCH_CLUSTER_HEAP:-384m}
VERSION=$(sed -n 's/^VERSION=${DBCANARY_OPENSEARCH_VERSION:-\(.*\)}$/\1/p' "$HERE/opensearch.sh")
HOME_DIR=$STACK_DIR/opensearch/opensearch-$VERSION # installed by opensearch.sh install
RUN_USER=${DBCANARY_OPENSEARCH_USER:-dbcanary-os}
CDIR=$STACK_DIR/opensearch-cluster

[[ "$NODES" =~ ^[1-9]$ ]] || die "opensearch-cluster: DBCANARY_OPENSEARCH_NODES must be 1-9, not $NODES"
[ -n "$VERSION" ] || die "opensearch-cluster: cannot read the version from opensearch.sh"

url() { echo "http://127.0.0.1:$((PORT_BASE + $1))"; }
pidfile() { echo "$CDIR/node$1/opensearch.pid"; }

install() {
  bash "$HERE/opensearch.sh" install
  [ -x "$HOME_DIR/bin/opensearch" ] || die "opensearch-cluster: no server tree at $HOME_DIR"
}

ensure_user() {
  id -u "$RUN_USER" >/dev/null 2>&1 && return 0
  [ "$(id -u)" -eq 0 ] || return 0 # not root: run as ourselves
  log "opensearch-cluster: creating system user $RUN_USER"
  useradd --system --no-create-home --home-dir "$CDIR" --shell /usr/sbin/nologin "$RUN_USER"
}

java_home() {
  if [ -n "${OPENSEARCH_JAVA_HOME:-}" ]; then echo "$OPENSEARCH_JAVA_HOME"; return; fi
  if [ -n "${JAVA_HOME:-}" ]; then echo "$JAVA_HOME"; return; fi
  local java; java=$(readlink -f "$(command -v java)") || die "opensearch-cluster: java (17) is required"
  dirname "$(dirname "$java")"
}

configure() {
  local i=$1 dir=$CDIR/node$1 seeds="" managers="" j
  for j in $(seq 1 "$NODES"); do
    seeds+="${seeds:+, }\"127.0.0.1:$((TRANSPORT_BASE + j))\""
    managers+="${managers:+, }\"os$j\""
  done
  mkdir -p "$dir/data" "$dir/logs" "$dir/config"
  cp -rn "$HOME_DIR/config/." "$dir/config/"
  sed -e "s#logs/#$dir/logs/#g" -e "s#HeapDumpPath=data#HeapDumpPath=$dir/data#" \
    "$HOME_DIR/config/jvm.options" > "$dir/config/jvm.options"
  cat > "$dir/config/opensearch.yml" <<CONF
cluster.name: dbcanary-cluster
node.name: os$i
network.host: 127.0.0.1
http.port: $((PORT_BASE + i))
transport.port: $((TRANSPORT_BASE + i))
discovery.seed_hosts: [$seeds]
cluster.initial_cluster_manager_nodes: [$managers]
path.data: $dir/data
path.logs: $dir/logs
cluster.routing.allocation.disk.threshold_enabled: false
action.auto_create_index: true
CONF
  cat > "$dir/config/jvm.options.d/dbcanary.options" <<OPTS
-Xms$HEAP
-Xmx$HEAP
-XX:TieredStopAtLevel=1
-XX:-AlwaysPreTouch
OPTS
  local d=$dir
  while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
  if [ "$(id -u)" -eq 0 ]; then chown -R "$RUN_USER:" "$dir/data" "$dir/logs" "$dir/config"; fi
}

node_up() { pid_alive "$(pidfile "$1")" && curl -fsS -o /dev/null --max-time 5 "$(url "$1")/" 2>/dev/null; }

# launch N: start node N in the background (not -d: that returns before the JVM is up).
launch() {
  local i=$1 run=()
  configure "$i"
  if [ "$(id -u)" -eq 0 ]; then run=(setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups); fi
  log "opensearch-cluster: starting node os$i on $(url "$i")"
  OPENSEARCH_PATH_CONF=$CDIR/node$i/config OPENSEARCH_JAVA_HOME=$(java_home) \
    nohup "${run[@]}" "$HOME_DIR/bin/opensearch" >"$CDIR/node$i/stdout.log" 2>&1 </dev/null 9>&- &
  echo $! > "$(pidfile "$i")"
}

# since T0: seconds (one decimal) since T0 (date +%s%N).
since() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

start() {
  install
  command -v curl >/dev/null || apt_install curl ca-certificates
  ensure_user
  mkdir -p "$CDIR"
  local i t0 started=() n=0 up rss pid any=false
  t0=$(date +%s%N)
  # A test cluster: when no node runs, it starts afresh (the initial cluster
  # managers only bootstrap an empty cluster, and no index is left over from
  # an earlier run); a node restarted beside running ones keeps its data.
  for i in $(seq 1 "$NODES"); do if pid_alive "$(pidfile "$i")"; then any=true; fi; done
  if [ "$any" = false ]; then rm -rf "$CDIR"/node*/data; fi
  # All at once: a new cluster elects its first cluster manager from the
  # initial nodes, so they must be up together.
  for i in $(seq 1 "$NODES"); do
    if node_up "$i"; then continue; fi
    if port_open 127.0.0.1 $((PORT_BASE + i)); then die "opensearch-cluster: port $((PORT_BASE + i)) is taken by another process"; fi
    launch "$i"; started+=("$i")
  done
  # Ready: every node answers and the cluster sees all of them.
  until up=$(curl -fsS --max-time 5 "$(url 1)/_cluster/health?wait_for_nodes=$NODES&timeout=2s" 2>/dev/null | grep -o '"number_of_nodes":[0-9]*' | cut -d: -f2) &&
        [ "${up:-0}" -ge "$NODES" ] && for i in $(seq 1 "$NODES"); do node_up "$i" || exit 1; done; do
    for i in "${started[@]}"; do
      if ! pid_alive "$(pidfile "$i")"; then
        tail -n 40 "$CDIR/node$i/stdout.log" >&2 || true
        die "opensearch-cluster: node os$i exited during start (log above, full logs under $CDIR/node$i/logs)"
      fi
    done
    n=$((n + 1))
    if [ "$n" -ge 240 ]; then die "opensearch-cluster: not $NODES nodes after 240 s (logs under $CDIR/node*/logs)"; fi
    sleep 1
  done
  for i in $(seq 1 "$NODES"); do
    pid=$(cat "$(pidfile "$i")")
    rss=$(( $(ps -o rss= -p "$pid" 2>/dev/null || echo 0) / 1024 ))
    log "opensearch-cluster: node os$i ($(url "$i")) RSS ${rss} MiB"
  done
  log "opensearch-cluster: $NODES nodes ready (started ${started[*]:-none}) in $(since "$t0")"
}

stop() {
  local i
  for i in $(seq "$NODES" -1 1); do stop_pid "$(pidfile "$i")" "opensearch os$i" 30; done
}

status() {
  local i
  for i in $(seq 1 "$NODES"); do node_up "$i" || return 1; done
}

env_() {
  local urls="" i
  for i in $(seq 1 "$NODES"); do urls+="${urls:+,}$(url "$i")"; done
  echo "DBCANARY_TEST_OPENSEARCH_URLS=$urls"
  echo "DBCANARY_TEST_OPENSEARCH_NODES=$NODES"
  for i in $(seq 1 "$NODES"); do
    echo "DBCANARY_TEST_OPENSEARCH_NODE${i}_PIDFILE=$(pidfile "$i")"
  done
}

case "${1:-}" in
  install) stack_lock opensearch-cluster; install ;;
  start) stack_lock opensearch-cluster; start ;;
  stop) stack_lock opensearch-cluster; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
