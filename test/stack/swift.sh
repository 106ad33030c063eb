#!/usr/bin/env bash
# OpenStack Swift with the s3api middleware (the reference deployment's OVH
# Swift S3) for tests: Debian's Swift 2.30, one-replica rings on 127.0.0.1,
# tempauth (S3 key test:tester, secret testing), s3api before tempauth in the
# SAIO pipeline (plus a rate limit on large listings after it, for the
# SlowDown test), a private memcached, and swift-object-updater (it replays the
# container-listing updates that failed, as on a real cluster). Every process
# runs in the foreground (workers = 0) with its PID recorded; config, rings,
# device directories, logs and the recon cache live under $STACK_DIR/swift.
# (Swift reads its hash prefix/suffix from the package's /etc/swift/swift.conf:
# that path is compiled in and the servers have no flag to move it.)
# Ports: proxy (S3 and Swift API) 16280, object 16210, container 16211,
# account 16212, memcached 16219.
# Opt-in https (test/compat): DBCANARY_SWIFT_TLS_DIR names a directory holding
# cert.pem and key.pem; a second proxy process with cert_file/key_file serves
# the same cluster over https on DBCANARY_SWIFT_TLS_PORT (16243), as a TLS
# deployment without a terminating load balancer does.
# Usage: swift.sh install|start|stop|status|env|stop-container|start-container|stop-updater|start-updater
#   stop-container/start-container stop or start only the container server, and
#   stop-updater/start-updater only the object-updater (tests of listing lag:
#   PUTs keep succeeding, the listing falls behind until the updater replays).
source "$(dirname "$0")/lib.sh"

PROXY_PORT=${DBCANARY_SWIFT_PORT:-16280}
OBJECT_PORT=${DBCANARY_SWIFT_OBJECT_PORT:-16210}
CONTAINER_PORT=${DBCANARY_SWIFT_CONTAINER_PORT:-16211}
ACCOUNT_PORT=${DBCANARY_SWIFT_ACCOUNT_PORT:-16212}
MEMCACHED_PORT=${DBCANARY_SWIFT_MEMCACHED_PORT:-16219}
TLS_DIR=${DBCANARY_SWIFT_TLS_DIR:-}
TLS_PORT=${DBCANARY_SWIFT_TLS_PORT:-16243}
# Seconds between two object-updater passes (Swift's default 300). Each pass
# forks a child that costs about 1 s of CPU even with nothing to replay: every
# 2 s that was half a core, the largest consumer of the 2-hour soak-chaos
# stack (6 Dec 2026: 1570 s of CPU in 53 min, more than its 3 Cassandra nodes
# together). Every 10 s it is a tenth of a core, and the listing catches up at
# most 10 s after a container server comes back.
UPDATER_INTERVAL=${DBCANARY_SWIFT_UPDATER_INTERVAL:-10}
[[ "$UPDATER_INTERVAL" =~ ^[1-9][0-9]*$ ]] || die "swift: DBCANARY_SWIFT_UPDATER_INTERVAL must be a whole number of seconds, not $UPDATER_INTERVAL"
# How long the proxy trusts its cached "the container exists" (Swift's
# recheck_container_existence, default 60 s): test/chaos sets it long, so that
# a stopped container server stops the listing only, as one container replica
# of three down does on a real cluster, instead of every PUT once the cache ends.
RECHECK_CONTAINER=${DBCANARY_SWIFT_RECHECK_CONTAINER:-60}
REGION=${DBCANARY_SWIFT_REGION:-us-east-1} # s3api's `location`: the region clients must sign for
DIR=$STACK_DIR/swift
CONF=$DIR/etc
DEVICES=$DIR/srv/node
LOGS=$DIR/log
RUN=$DIR/run
PACKAGES=(swift swift-proxy swift-account swift-container swift-object python3-swift memcached)

install() {
  local p missing=0
  for p in swift-proxy-server swift-object-server swift-container-server swift-account-server swift-object-updater swift-ring-builder memcached; do
    command -v "$p" >/dev/null || missing=1
  done
  [ "$missing" = 0 ] || apt_install "${PACKAGES[@]}"
}

# proxy_conf PORT EXTRA: a proxy-server.conf listening on PORT, with EXTRA
# lines in [DEFAULT] (the TLS proxy's cert_file and key_file).
proxy_conf() {
  cat <<CONF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $1
$2
workers = 0
user = root
swift_dir = $CONF
log_level = INFO

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk tempurl ratelimit s3api tempauth ratelimit-s3 copy container-quotas account-quotas slo dlo versioned_writes symlink proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
# A storage server that is down answers at once (connection refused); a short
# node timeout keeps a stopped container server from stalling PUTs.
conn_timeout = 0.5
node_timeout = 5
recheck_container_existence = $RECHECK_CONTAINER

[filter:s3api]
use = egg:swift#s3api
location = $REGION

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$MEMCACHED_PORT

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:bulk]
use = egg:swift#bulk
[filter:tempurl]
use = egg:swift#tempurl
[filter:ratelimit]
use = egg:swift#ratelimit
# A second rate limit after s3api, which SAIO does not have: the one before
# s3api sees S3 paths and limits nothing. Listings of a container of 100
# objects or more: one per 5 s, refused (498, SlowDown through s3api) rather
# than delayed beyond 0.5 s. The canary's test buckets stay far below 100
# objects; the SlowDown test fills one past it.
[filter:ratelimit-s3]
use = egg:swift#ratelimit
container_listing_ratelimit_100 = 0.2
max_sleep_time_seconds = 0.5
[filter:copy]
use = egg:swift#copy
[filter:container-quotas]
use = egg:swift#container_quotas
[filter:account-quotas]
use = egg:swift#account_quotas
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
[filter:versioned_writes]
use = egg:swift#versioned_writes
[filter:symlink]
use = egg:swift#symlink
CONF
}

# configure writes the config files (cheap, every start: a port change takes
# effect) and builds the rings once (they name the ports: rebuilt only when
# a port changed).
configure() {
  mkdir -p "$CONF" "$DEVICES/d1" "$LOGS" "$RUN" "$DIR/cache"
  local common="[DEFAULT]
bind_ip = 127.0.0.1
workers = 0
user = root
swift_dir = $CONF
devices = $DEVICES
mount_check = false
disable_fallocate = true
log_level = INFO
recon_cache_path = $DIR/cache
"
  printf '%s\n' "$common" "bind_port = $OBJECT_PORT

[pipeline:main]
pipeline = object-server

[app:object-server]
use = egg:swift#object

[object-updater]
# Replays failed container updates every UPDATER_INTERVAL s (default 300 s):
# the listing catches up soon after a container server comes back.
interval = $UPDATER_INTERVAL
concurrency = 1
node_timeout = 3
" > "$CONF/object-server.conf"
  printf '%s\n' "$common" "bind_port = $CONTAINER_PORT

[pipeline:main]
pipeline = container-server

[app:container-server]
use = egg:swift#container
" > "$CONF/container-server.conf"
  printf '%s\n' "$common" "bind_port = $ACCOUNT_PORT

[pipeline:main]
pipeline = account-server

[app:account-server]
use = egg:swift#account
" > "$CONF/account-server.conf"
  proxy_conf "$PROXY_PORT" "" > "$CONF/proxy-server.conf"
  if [ -n "$TLS_DIR" ]; then
    local f
    for f in cert.pem key.pem; do [ -s "$TLS_DIR/$f" ] || die "swift: $TLS_DIR/$f is missing"; done
    proxy_conf "$TLS_PORT" "cert_file = $TLS_DIR/cert.pem
key_file = $TLS_DIR/key.pem" > "$CONF/proxy-server-tls.conf"
  fi
  local ports="$OBJECT_PORT $CONTAINER_PORT $ACCOUNT_PORT"
  if [ "$(cat "$CONF/rings.ports" 2>/dev/null)" != "$ports" ] || [ ! -s "$CONF/object.ring.gz" ]; then
    log "swift: building one-replica rings"
    local kind port
    for kind in object container account; do
      case $kind in object) port=$OBJECT_PORT ;; container) port=$CONTAINER_PORT ;; account) port=$ACCOUNT_PORT ;; esac
      rm -f "$CONF/$kind.builder" "$CONF/$kind.ring.gz"
      swift-ring-builder "$CONF/$kind.builder" create 10 1 1 >/dev/null
      swift-ring-builder "$CONF/$kind.builder" add "r1z1-127.0.0.1:$port/d1" 100 >/dev/null
      # Exit code 1 is a warning (e.g. "balance is off"); 2 is an error.
      swift-ring-builder "$CONF/$kind.builder" rebalance >/dev/null || [ $? -eq 1 ] || die "swift: rebalance of the $kind ring failed"
    done
    echo "$ports" > "$CONF/rings.ports"
  fi
}

# spawn NAME PORT CMD...: start one process in the background and record its
# PID (PORT "-" for a daemon that listens on nothing); await checks the port.
spawn() {
  local name=$1 port=$2; shift 2
  local pidfile=$RUN/$name.pid
  if pid_alive "$pidfile"; then return 0; fi
  if [ "$port" != - ] && port_open 127.0.0.1 "$port"; then die "swift: port $port ($name) is taken by another process"; fi
  nohup "$@" >>"$LOGS/$name.log" 2>&1 9>&- & # 9>&-: the server must not inherit (and hold) the lock
  echo $! > "$pidfile"
}

# await NAME PORT: wait for a spawned server's port, failing if it died.
await() {
  local name=$1 port=$2
  if ! wait_port 127.0.0.1 "$port" 60 "$RUN/$name.pid"; then
    tail -n 30 "$LOGS/$name.log" >&2
    die "swift: $name did not open 127.0.0.1:$port (log above, $LOGS/$name.log)"
  fi
}

# ready: the proxy's healthcheck answers 200 and an S3 request reaches s3api
# (an anonymous GET / answers with an S3 error document, not Swift's).
ready() {
  local line
  line=$( (exec 3<>"/dev/tcp/127.0.0.1/$PROXY_PORT" &&
    printf 'GET /healthcheck HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
    IFS= read -r -t 5 l <&3 && printf '%s' "$l") 2>/dev/null) || return 1
  [[ $line == *" 200 "* ]]
}

start_container() {
  spawn container-server "$CONTAINER_PORT" swift-container-server "$CONF/container-server.conf" -v
  await container-server "$CONTAINER_PORT"
}

start_updater() {
  spawn object-updater - swift-object-updater "$CONF/object-server.conf" -v
}

start() {
  install
  if status; then log "swift: already running"; return 0; fi
  configure
  log "swift: starting on 127.0.0.1:$PROXY_PORT (object $OBJECT_PORT, container $CONTAINER_PORT, account $ACCOUNT_PORT, memcached $MEMCACHED_PORT)"
  # Started side by side (each Python server takes seconds to import), then awaited.
  spawn memcached "$MEMCACHED_PORT" memcached -l 127.0.0.1 -p "$MEMCACHED_PORT" -U 0 -m 64 -u root
  spawn object-server "$OBJECT_PORT" swift-object-server "$CONF/object-server.conf" -v
  spawn container-server "$CONTAINER_PORT" swift-container-server "$CONF/container-server.conf" -v
  spawn account-server "$ACCOUNT_PORT" swift-account-server "$CONF/account-server.conf" -v
  start_updater
  spawn proxy-server "$PROXY_PORT" swift-proxy-server "$CONF/proxy-server.conf" -v
  if [ -n "$TLS_DIR" ]; then spawn proxy-server-tls "$TLS_PORT" swift-proxy-server "$CONF/proxy-server-tls.conf" -v; fi
  await memcached "$MEMCACHED_PORT"
  await object-server "$OBJECT_PORT"
  await container-server "$CONTAINER_PORT"
  await account-server "$ACCOUNT_PORT"
  await proxy-server "$PROXY_PORT"
  if [ -n "$TLS_DIR" ]; then await proxy-server-tls "$TLS_PORT"; fi
  local i=0
  until ready; do
    if ! pid_alive "$RUN/proxy-server.pid"; then tail -n 30 "$LOGS/proxy-server.log" >&2; die "swift: the proxy exited during startup (log above)"; fi
    i=$((i + 1)); [ "$i" -ge 300 ] && { tail -n 30 "$LOGS/proxy-server.log" >&2; die "swift: not ready after 60s"; }
    sleep 0.2
  done
  log "swift: ready (proxy pid $(cat "$RUN/proxy-server.pid"))"
}

stop() {
  local name
  for name in proxy-server-tls proxy-server object-updater account-server container-server object-server memcached; do
    stop_pid "$RUN/$name.pid" "swift $name" 20
  done
}

status() {
  local name
  for name in memcached object-server container-server account-server object-updater proxy-server; do
    pid_alive "$RUN/$name.pid" || return 1
  done
  if [ -n "$TLS_DIR" ]; then pid_alive "$RUN/proxy-server-tls.pid" || return 1; fi
  ready
}

# The S3 credentials are tempauth's fixed test user (Swift's SAIO convention),
# written to files like MinIO's so tests read both stores the same way.
env_() {
  mkdir -p "$DIR"
  [ -s "$DIR/access-key" ] || { printf 'test:tester' > "$DIR/access-key"; chmod 600 "$DIR/access-key"; }
  [ -s "$DIR/secret-key" ] || { printf 'testing' > "$DIR/secret-key"; chmod 600 "$DIR/secret-key"; }
  echo "DBCANARY_TEST_S3_ENDPOINT=127.0.0.1:$PROXY_PORT"
  echo "DBCANARY_TEST_S3_REGION=$REGION"
  echo "DBCANARY_TEST_S3_ACCESS_KEY_FILE=$DIR/access-key"
  echo "DBCANARY_TEST_S3_SECRET_KEY_FILE=$DIR/secret-key"
  echo "DBCANARY_TEST_S3_PORT=$PROXY_PORT"
  if [ -n "$TLS_DIR" ]; then echo "DBCANARY_TEST_S3_TLS_ENDPOINT=127.0.0.1:$TLS_PORT"; fi
}

case "${1:-}" in
  install) stack_lock swift; install ;;
  start) stack_lock swift; start ;;
  stop) stack_lock swift; stop ;;
  status) status ;;
  env) env_ ;;
  stop-container) stack_lock swift; stop_pid "$RUN/container-server.pid" "swift container-server" 20 ;;
  start-container) stack_lock swift; start_container; log "swift: container-server running (pid $(cat "$RUN/container-server.pid"))" ;;
  stop-updater) stack_lock swift; stop_pid "$RUN/object-updater.pid" "swift object-updater" 20 ;;
  start-updater) stack_lock swift; start_updater; log "swift: object-updater running (pid $(cat "$RUN/object-updater.pid"))" ;;
  *) echo "usage: $0 install|start|stop|status|env|stop-container|start-container|stop-updater|start-updater" >&2; exit 2 ;;
esac
