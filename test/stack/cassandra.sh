#!/usr/bin/env bash
# Cassandra 5.0 for tests and the demo: cassandra-all from Maven Central run as
# a single node bound to 127.0.0.1, with PasswordAuthenticator and
# CassandraAuthorizer on (superuser cassandra/cassandra) so auth and grants
# are tested against the same node as the workloads. JMX is off.
# Usage: cassandra.sh install|start|stop|status|env
# The settings below default to that single node; test/stack/cassandra-cluster.sh
# runs several nodes of a cluster with this script (listen address, seeds, ...).
source "$(dirname "$0")/lib.sh"

# The default version (cassandra-cluster.sh reads this line). DBCANARY_CASSANDRA_VERSION
# runs another cassandra-all release from Maven Central (test/compat: 4.1.10), with its
# own classpath cache and data folder; 4.x gets the module flags of its jvm11-server.options
# on top of 5.0's for Java 17 (docs/evidence/compatibility.md: what that gives).
VERSION=5.0.9
[ -n "${DBCANARY_CASSANDRA_VERSION:-}" ] && VERSION=$DBCANARY_CASSANDRA_VERSION
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cassandra: DBCANARY_CASSANDRA_VERSION must be X.Y.Z, not $VERSION"
PORT=${DBCANARY_CASSANDRA_PORT:-9042}
STORAGE_PORT=${DBCANARY_CASSANDRA_STORAGE_PORT:-7000}
HEAP_MAX=${DBCANARY_CASSANDRA_HEAP_MAX:-1G}
HEAP_MIN=${DBCANARY_CASSANDRA_HEAP_MIN:-256M}
# Cluster settings (cassandra-cluster.sh): the node's address (a loopback alias
# such as 127.0.0.2), the seeds (host:storage_port, comma-separated), the
# address advertised to drivers (a fault proxy in front of the node), whether
# a new node bootstraps, the cluster name and password authentication.
LISTEN=${DBCANARY_CASSANDRA_LISTEN:-127.0.0.1}
SEEDS=${DBCANARY_CASSANDRA_SEEDS:-$LISTEN:$STORAGE_PORT}
BROADCAST_RPC=${DBCANARY_CASSANDRA_BROADCAST_RPC_ADDRESS:-}
AUTO_BOOTSTRAP=${DBCANARY_CASSANDRA_AUTO_BOOTSTRAP:-}
CLUSTER_NAME=${DBCANARY_CASSANDRA_CLUSTER_NAME:-dbcanary-test}
AUTH=${DBCANARY_CASSANDRA_AUTH:-true}
# Commit log durability, for the durability ledger's proofs on a private node:
# periodic (with its period) or batch, and an optional compressor class
# (LZ4Compressor: segments are then buffered in the process until each sync,
# so a SIGKILL loses what was not synced, as a machine crash would).
COMMITLOG_SYNC=${DBCANARY_CASSANDRA_COMMITLOG_SYNC:-periodic}
COMMITLOG_SYNC_PERIOD=${DBCANARY_CASSANDRA_COMMITLOG_SYNC_PERIOD:-10000ms}
COMMITLOG_COMPRESSION=${DBCANARY_CASSANDRA_COMMITLOG_COMPRESSION:-}
# hinted_handoff_enabled (unset: Cassandra's default, true). The cluster's
# ledger proof turns it off so that a write acknowledged at ONE exists on one
# replica only, as when the others were down past max_hint_window.
HINTED_HANDOFF=${DBCANARY_CASSANDRA_HINTED_HANDOFF:-}
# Client-to-node TLS (native protocol only): TLS_DIR holds ca.pem and
# server.pem (the node's private key, PKCS#8, then its certificate); with
# TLS_CLIENT_AUTH=true clients must present a certificate signed by ca.pem.
TLS_DIR=${DBCANARY_CASSANDRA_TLS_DIR:-}
TLS_CLIENT_AUTH=${DBCANARY_CASSANDRA_TLS_CLIENT_AUTH:-false}
SHARED=${DBCANARY_CASSANDRA_SHARED_DIR:-$STACK_DIR/cassandra-$VERSION} # classpath cache, shared by every node
DIR=$STACK_DIR/cassandra
# Another version never opens the default one's data (an older one cannot read it).
[ "$VERSION" = 5.0.9 ] || DIR=$STACK_DIR/cassandra-$VERSION-node
PIDFILE=$DIR/cassandra.pid
CPFILE=$SHARED/classpath.txt

install() {
  if [ -s "$CPFILE" ] && [ -f "$(cut -d: -f1 "$CPFILE")" ]; then
    grep -q "<version>$VERSION</version>" "$SHARED/pom.xml" 2>/dev/null ||
      die "cassandra: the classpath cache $SHARED is not of cassandra-all $VERSION"
    return 0
  fi
  command -v java >/dev/null || apt_install openjdk-17-jre-headless
  command -v mvn >/dev/null || apt_install maven
  mkdir -p "$SHARED"
  cat > "$SHARED/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dbcanary</groupId><artifactId>cassandra-stack</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId><version>$VERSION</version></dependency>
  </dependencies>
</project>
POM
  log "cassandra: resolving cassandra-all $VERSION from Maven Central (cached after the first run)"
  (cd "$SHARED" && mvn -B -q dependency:build-classpath -Dmdep.outputFile="$CPFILE.tmp" >&2)
  # Only jars: yaml and logback config are passed by property.
  tr ':' '\n' < "$CPFILE.tmp" | grep '\.jar$' | paste -sd: > "$CPFILE"
  rm -f "$CPFILE.tmp"
}

configure() {
  mkdir -p "$DIR/data" "$DIR/logs" "$DIR/triggers"
  local commitlog="commitlog_sync: $COMMITLOG_SYNC"
  if [ "$COMMITLOG_SYNC" = periodic ]; then commitlog+=$'\n'"commitlog_sync_period: $COMMITLOG_SYNC_PERIOD"; fi
  if [ -n "$COMMITLOG_COMPRESSION" ]; then commitlog+=$'\n'"commitlog_compression:"$'\n'"  - class_name: $COMMITLOG_COMPRESSION"; fi
  printf 'cassandra' > "$DIR/password"
  chmod 600 "$DIR/password"
  local auth='authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer'
  if [ "$AUTH" != true ]; then auth='authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer'; fi
  cat > "$DIR/cassandra.yaml" <<YAML
cluster_name: $CLUSTER_NAME
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$SEEDS"
listen_address: $LISTEN
rpc_address: $LISTEN
storage_port: $STORAGE_PORT
native_transport_port: $PORT
start_native_transport: true
$commitlog
memtable_heap_space: 128MiB
memtable_offheap_space: 128MiB
file_cache_size: 64MiB
key_cache_size: 16MiB
concurrent_compactors: 1
auto_snapshot: false
$auth
role_manager: CassandraRoleManager
# Grants changed by tests take effect at once.
roles_validity: 0ms
permissions_validity: 0ms
credentials_validity: 0ms
YAML
  if [ -n "$BROADCAST_RPC" ]; then echo "broadcast_rpc_address: $BROADCAST_RPC" >> "$DIR/cassandra.yaml"; fi
  if [ -n "$AUTO_BOOTSTRAP" ]; then echo "auto_bootstrap: $AUTO_BOOTSTRAP" >> "$DIR/cassandra.yaml"; fi
  if [ -n "$HINTED_HANDOFF" ]; then echo "hinted_handoff_enabled: $HINTED_HANDOFF" >> "$DIR/cassandra.yaml"; fi
  if [ -n "$TLS_DIR" ]; then
    [ -f "$TLS_DIR/server.pem" ] && [ -f "$TLS_DIR/ca.pem" ] || die "cassandra: DBCANARY_CASSANDRA_TLS_DIR needs ca.pem and server.pem"
    cat >> "$DIR/cassandra.yaml" <<YAML
client_encryption_options:
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  enabled: true
  optional: false
  keystore: $TLS_DIR/server.pem
  truststore: $TLS_DIR/ca.pem
  require_client_auth: $TLS_CLIENT_AUTH
YAML
  fi
  cat > "$DIR/logback.xml" <<XML
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$DIR/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
XML
}

start() {
  install
  if pid_alive "$PIDFILE" && port_open "$LISTEN" "$PORT"; then log "cassandra: already running"; return 0; fi
  if port_open "$LISTEN" "$PORT"; then die "cassandra: port $PORT is taken by another process (set DBCANARY_CASSANDRA_PORT)"; fi
  configure
  local cp jamm; cp=$(cat "$CPFILE")
  jamm=$(tr ':' '\n' < "$CPFILE" | grep '/jamm-[0-9.]*\.jar$' | head -n1)
  [ -n "$jamm" ] || die "cassandra: jamm jar not on the classpath"
  local exports=(java.base/jdk.internal.misc java.rmi/sun.rmi.registry java.rmi/sun.rmi.server
    java.sql/java.sql java.base/java.lang.ref jdk.unsupported/sun.misc
    jdk.compiler/com.sun.tools.javac.file jdk.attach/sun.tools.attach
    java.management.rmi/com.sun.jmx.remote.internal.rmi)
  local opens=(java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref
    java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module
    java.base/jdk.internal.util.jar java.base/sun.nio.ch java.base/java.io java.base/java.lang.reflect
    java.base/java.lang java.base/java.util jdk.management/com.sun.management.internal
    jdk.compiler/com.sun.tools.javac)
  # 4.x supports Java 8 and 11 only. On 17 it needs, beyond 5.0's set, the two exports of its
  # conf/jvm11-server.options and three opens for jamm 0.3.2, which measures objects by
  # reflection (5.0's jamm 0.4 does not): without them the node dies at start with
  # InaccessibleObjectException ... does not "opens java.util.concurrent" (then .atomic, java.nio).
  if [[ "$VERSION" == 4.* ]]; then
    exports+=(java.base/jdk.internal.ref java.base/sun.nio.ch)
    opens+=(java.base/java.util.concurrent java.base/java.util.concurrent.atomic java.base/java.nio)
  fi
  # Every collection, with its pause, goes to logs/gc.log (UTC), so that a latency
  # stretch of a long run can be matched with the node's pauses (docs/evidence/soak-chaos.md).
  local args=("-Xms$HEAP_MIN" "-Xmx$HEAP_MAX" -Xss256k -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError
    "-Xlog:gc:file=$DIR/logs/gc.log:utctime,uptime:filecount=3,filesize=5m"
    -Djdk.attach.allowAttachSelf=true "-javaagent:$jamm"
    -Dcassandra-foreground=yes "-Dcassandra.config=file://$DIR/cassandra.yaml"
    "-Dcassandra.storagedir=$DIR/data" "-Dcassandra.logdir=$DIR/logs" "-Dcassandra.triggers_dir=$DIR/triggers"
    -Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.shutdown_announce_in_ms=0
    -Dcassandra.superuser_setup_delay_ms=0 "-Dlogback.configurationFile=$DIR/logback.xml")
  for e in "${exports[@]}"; do args+=(--add-exports "$e=ALL-UNNAMED"); done
  for o in "${opens[@]}"; do args+=(--add-opens "$o=ALL-UNNAMED"); done
  log "cassandra: starting $VERSION on $LISTEN:$PORT"
  : > "$DIR/logs/system.log"
  nohup java "${args[@]}" -cp "$cp" org.apache.cassandra.service.CassandraDaemon \
    > "$DIR/logs/stdout.log" 2>&1 < /dev/null 9>&- &
  echo $! > "$PIDFILE"
  if ! wait_port "$LISTEN" "$PORT" 120 "$PIDFILE"; then
    tail -n 30 "$DIR/logs/system.log" "$DIR/logs/stdout.log" >&2 || true
    die "cassandra: did not start (logs above, under $DIR/logs)"
  fi
  # Logins fail until the default superuser exists (a fraction of a second after the port opens).
  local i=0
  if [ "$AUTH" = true ]; then
    until grep -q 'Created default superuser role' "$DIR/logs/system.log" 2>/dev/null || [ -s "$DIR/data/.superuser-created" ]; do
      i=$((i + 1)); [ "$i" -ge 150 ] && { log "cassandra: default superuser not reported after 30s (continuing)"; break; }
      sleep 0.2
    done
    touch "$DIR/data/.superuser-created"
  fi
  log "cassandra: ready (pid $(cat "$PIDFILE"))"
}

stop() { stop_pid "$PIDFILE" cassandra 60; }

status() { pid_alive "$PIDFILE" && port_open "$LISTEN" "$PORT"; }

env_() {
  echo "DBCANARY_TEST_CASSANDRA_HOST=${BROADCAST_RPC:-$LISTEN}"
  echo "DBCANARY_TEST_CASSANDRA_PORT=$PORT"
  if [ "$AUTH" = true ]; then
    echo "DBCANARY_TEST_CASSANDRA_USER=cassandra"
    echo "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE=$DIR/password"
  fi
  echo "DBCANARY_TEST_CASSANDRA_DC=datacenter1"
}

case "${1:-}" in
  install) stack_lock cassandra; install ;;
  start) stack_lock cassandra; start ;;
  stop) stack_lock cassandra; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
