#!/usr/bin/env bash
# SeaweedFS's S3 gateway, a second independent S3 implementation besides MinIO
# and Swift (test/compat): one `weed server` process running a master, a volume
# server, a filer and the S3 gateway, all bound to 127.0.0.1.
# Built from the Go module proxy at a pinned pseudo-version (the only version the
# proxy serves). Its go.mod has replace directives, so `go install` refuses it:
# the module source is downloaded and built with `go build` (several minutes
# cold on 2 cores, run with nice), cached as $STACK_DIR/bin/weed-$VERSION.
# Data, config and log under $STACK_DIR/seaweedfs; the S3 identities (an admin
# and a least-privilege canary) are generated once into files, like MinIO's
# root credentials.
# Telemetry, the Iceberg and Lance catalog ports are off, and so is the
# gateway's auto-creation of a missing bucket on an admin identity's first PUT
# (-s3.autoCreateBucket, on by default): a missing bucket stays missing, as on
# AWS, MinIO and Swift, so create_bucket: false means what it says (docs/s3.md).
# Ports: S3 16383, master 16333, volume 16380, filer 16388 (each gRPC +10000).
# Opt-in https (test/compat): DBCANARY_SEAWEEDFS_TLS_DIR names a directory
# holding cert.pem and key.pem; the gateway then also serves S3 over https on
# DBCANARY_SEAWEEDFS_TLS_PORT (16443). DBCANARY_SEAWEEDFS_BIN_DIR lets a
# private instance (another DBCANARY_STACK_DIR) use the cached build.
# Usage: seaweedfs.sh install|start|stop|status|env|version
source "$(dirname "$0")/lib.sh"

VERSION=${DBCANARY_SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
MODULE=github.com/seaweedfs/seaweedfs
S3_PORT=${DBCANARY_SEAWEEDFS_PORT:-16383}
MASTER_PORT=${DBCANARY_SEAWEEDFS_MASTER_PORT:-16333}
VOLUME_PORT=${DBCANARY_SEAWEEDFS_VOLUME_PORT:-16380}
FILER_PORT=${DBCANARY_SEAWEEDFS_FILER_PORT:-16388}
TLS_DIR=${DBCANARY_SEAWEEDFS_TLS_DIR:-}
TLS_PORT=${DBCANARY_SEAWEEDFS_TLS_PORT:-16443}
DIR=$STACK_DIR/seaweedfs
BIN_DIR=${DBCANARY_SEAWEEDFS_BIN_DIR:-$STACK_DIR/bin}
BIN=$BIN_DIR/weed-$VERSION
PIDFILE=$DIR/weed.pid
ACCESS_KEY_FILE=$DIR/access-key
SECRET_KEY_FILE=$DIR/secret-key
# A least-privilege identity beside the admin: read, write, list and tagging
# on one bucket only (SeaweedFS's per-bucket actions), as an operator gives
# the canary.
CANARY_BUCKET=${DBCANARY_SEAWEEDFS_CANARY_BUCKET:-dbcanary-canary}
CANARY_ACCESS_KEY_FILE=$DIR/canary-access-key
CANARY_SECRET_KEY_FILE=$DIR/canary-secret-key

install() {
  case "$VERSION" in
    v*) ;;
    *) die "seaweedfs: DBCANARY_SEAWEEDFS_VERSION must be a module version, not '$VERSION'" ;;
  esac
  [ -x "$BIN" ] && return 0
  mkdir -p "$BIN_DIR" "$DIR"
  log "seaweedfs: building $MODULE@$VERSION from the Go module proxy (several minutes cold)"
  local src
  # From $DIR (no go.mod): the caller's module, e.g. dbcanary's, is left alone.
  src=$(cd "$DIR" && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" | awk -F'"' '$2 == "Dir" { print $4 }')
  [ -d "$src/weed" ] || die "seaweedfs: go mod download gave no source directory for $MODULE@$VERSION"
  # Built in the (read-only) module directory as its own main module, so its
  # replace directives apply; only the binary is written, to a temporary name.
  (cd "$src" && GOWORK=off GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -o "$BIN.tmp.$$" ./weed) >&2 \
    || { rm -f "$BIN.tmp.$$"; die "seaweedfs: build failed"; }
  mv "$BIN.tmp.$$" "$BIN"
}

# ready: the S3 gateway's health endpoint answers 200 (it does once the filer
# it fronts is up).
ready() {
  local line
  line=$( (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT" &&
    printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
    IFS= read -r -t 2 l <&3 && printf '%s' "$l") 2>/dev/null) || return 1
  [[ $line == *" 200 "* ]]
}

# key_pair ACCESS_FILE SECRET_FILE: an access key and a secret, generated once
# (the access key is a secret too).
key_pair() {
  if [ ! -s "$1" ]; then
    local seed; seed=$(secret "$1-seed")
    printf 'dbcanary%s' "${seed:0:12}" > "$1"
    chmod 600 "$1"
  fi
  secret "$2" >/dev/null
}

# credentials: the S3 identities (admin, and the least-privilege canary).
credentials() {
  key_pair "$ACCESS_KEY_FILE" "$SECRET_KEY_FILE"
  key_pair "$CANARY_ACCESS_KEY_FILE" "$CANARY_SECRET_KEY_FILE"
  local b=$CANARY_BUCKET
  # Written without echoing the keys anywhere but this 0600 file.
  (umask 077 && printf '{"identities":[{"name":"dbcanary","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]},{"name":"dbcanary-canary","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Read:%s","Write:%s","List:%s","Tagging:%s"]}]}\n' \
    "$(cat "$ACCESS_KEY_FILE")" "$(cat "$SECRET_KEY_FILE")" "$(cat "$CANARY_ACCESS_KEY_FILE")" "$(cat "$CANARY_SECRET_KEY_FILE")" "$b" "$b" "$b" "$b" > "$DIR/s3.json")
}

start() {
  install
  if pid_alive "$PIDFILE" && ready; then log "seaweedfs: already running"; return 0; fi
  local p
  for p in "$S3_PORT" "$MASTER_PORT" "$VOLUME_PORT" "$FILER_PORT"; do
    if port_open 127.0.0.1 "$p" || port_open 127.0.0.1 $((p + 10000)); then
      die "seaweedfs: port $p or $((p + 10000)) is taken by another process (set DBCANARY_SEAWEEDFS_*PORT)"
    fi
  done
  local tls=()
  if [ -n "$TLS_DIR" ]; then
    for p in cert.pem key.pem; do [ -s "$TLS_DIR/$p" ] || die "seaweedfs: $TLS_DIR/$p is missing"; done
    if port_open 127.0.0.1 "$TLS_PORT"; then die "seaweedfs: port $TLS_PORT is taken by another process (set DBCANARY_SEAWEEDFS_TLS_PORT)"; fi
    tls=(-s3.port.https="$TLS_PORT" -s3.cert.file="$TLS_DIR/cert.pem" -s3.key.file="$TLS_DIR/key.pem")
  fi
  mkdir -p "$DIR/data"
  credentials
  log "seaweedfs: starting on 127.0.0.1:$S3_PORT (master $MASTER_PORT, volume $VOLUME_PORT, filer $FILER_PORT)"
  # Small volumes (64 MiB, at most 16) keep the footprint small; the local
  # sockets go under $DIR instead of /tmp (two instances never share one).
  nohup "$BIN" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$DIR/data" \
    -master.port="$MASTER_PORT" -master.volumeSizeLimitMB=64 -master.telemetry=false \
    -volume.port="$VOLUME_PORT" -volume.max=16 \
    -filer -filer.port="$FILER_PORT" -filer.localSocket="$DIR/filer.sock" \
    -s3 -s3.port="$S3_PORT" -s3.config="$DIR/s3.json" -s3.port.iceberg=0 -s3.port.lance=0 -s3.autoCreateBucket=false \
    -s3.localSocket="$DIR/s3.sock" "${tls[@]}" \
    >"$DIR/weed.log" 2>&1 9>&- & # 9>&-: the server must not inherit (and hold) the lock
  echo $! > "$PIDFILE"
  local i=0
  until ready && { [ -z "$TLS_DIR" ] || port_open 127.0.0.1 "$TLS_PORT"; }; do
    if ! pid_alive "$PIDFILE"; then tail -n 30 "$DIR/weed.log" >&2; die "seaweedfs: exited during startup (log above)"; fi
    i=$((i + 1)); [ "$i" -ge 600 ] && { tail -n 30 "$DIR/weed.log" >&2; stop; die "seaweedfs: not ready after 120s"; }
    sleep 0.2
  done
  log "seaweedfs: ready (pid $(cat "$PIDFILE"))"
}

stop() { stop_pid "$PIDFILE" seaweedfs 30; }

status() { pid_alive "$PIDFILE" && ready; }

env_() {
  echo "DBCANARY_TEST_S3_ENDPOINT=127.0.0.1:$S3_PORT"
  echo "DBCANARY_TEST_S3_REGION=us-east-1"
  echo "DBCANARY_TEST_S3_ACCESS_KEY_FILE=$ACCESS_KEY_FILE"
  echo "DBCANARY_TEST_S3_SECRET_KEY_FILE=$SECRET_KEY_FILE"
  echo "DBCANARY_TEST_S3_PORT=$S3_PORT"
  echo "DBCANARY_TEST_SEAWEEDFS_VERSION=$VERSION"
  echo "DBCANARY_TEST_S3_CANARY_BUCKET=$CANARY_BUCKET"
  echo "DBCANARY_TEST_S3_CANARY_ACCESS_KEY_FILE=$CANARY_ACCESS_KEY_FILE"
  echo "DBCANARY_TEST_S3_CANARY_SECRET_KEY_FILE=$CANARY_SECRET_KEY_FILE"
  if [ -n "$TLS_DIR" ]; then echo "DBCANARY_TEST_S3_TLS_ENDPOINT=127.0.0.1:$TLS_PORT"; fi
}

case "${1:-}" in
  install) stack_lock seaweedfs; install ;;
  start) stack_lock seaweedfs; start ;;
  stop) stack_lock seaweedfs; stop ;;
  status) status ;;
  env) env_ ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 install|start|stop|status|env|version" >&2; exit 2 ;;
esac
