#!/usr/bin/env bash
# MinIO (S3) for tests and the demo: built from the Go module proxy (no semver
# tags: @latest is a pseudo-version), cached under $STACK_DIR/bin, S3 API on
# 127.0.0.1:9000 and console on 127.0.0.1:9001, data under $STACK_DIR/minio.
# Root credentials are generated once into files and passed via environment.
# (MinIO also listens on the other loopback address, [::1]:9000, by design:
# its console talks to the server over loopback. Nothing binds a public address.)
# Usage: minio.sh install|start|stop|status|env
source "$(dirname "$0")/lib.sh"

VERSION=${DBCANARY_MINIO_VERSION:-latest}
PORT=${DBCANARY_MINIO_PORT:-9000}
CONSOLE_PORT=${DBCANARY_MINIO_CONSOLE_PORT:-9001}
DIR=$STACK_DIR/minio
BIN=$STACK_DIR/bin/minio
PIDFILE=$DIR/minio.pid
ROOT_USER_FILE=$DIR/root-user
ROOT_PASSWORD_FILE=$DIR/root-password

# lock serialises install/start/stop across processes: test packages run in
# parallel, and a stop finishing while another start writes the PID file
# would otherwise delete the new server's PID file.
lock() {
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  flock -w 900 9 || die "minio: could not get $DIR/.lock within 900s"
}

install() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$STACK_DIR/bin" "$DIR/gobin"
  log "minio: building @$VERSION from the Go module proxy (takes minutes cold)"
  GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "github.com/minio/minio@$VERSION"
  mv "$DIR/gobin/minio" "$BIN"
}

ready() {
  # /minio/health/ready answers 200 once the object layer is up (subshell: a
  # refused /dev/tcp redirection must not end this script).
  local line
  line=$( (exec 3<>"/dev/tcp/127.0.0.1/$PORT" &&
    printf 'GET /minio/health/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
    IFS= read -r -t 2 l <&3 && printf '%s' "$l") 2>/dev/null) || return 1
  [[ $line == *" 200 "* ]]
}

start() {
  install
  if pid_alive "$PIDFILE" && ready; then log "minio: already running"; return 0; fi
  if port_open 127.0.0.1 "$PORT"; then die "minio: port $PORT is taken by another process (set DBCANARY_MINIO_PORT)"; fi
  mkdir -p "$DIR/data"
  # The user name is a secret too (MinIO's root access key): generated once.
  if [ ! -s "$ROOT_USER_FILE" ]; then
    local seed; seed=$(secret "$DIR/root-user-seed")
    printf 'dbcanary-%s' "${seed:0:8}" > "$ROOT_USER_FILE"
    chmod 600 "$ROOT_USER_FILE"
  fi
  secret "$ROOT_PASSWORD_FILE" >/dev/null
  log "minio: starting on 127.0.0.1:$PORT"
  MINIO_ROOT_USER=$(cat "$ROOT_USER_FILE") MINIO_ROOT_PASSWORD=$(cat "$ROOT_PASSWORD_FILE") \
    MINIO_BROWSER=on MINIO_UPDATE=off \
    nohup "$BIN" server "$DIR/data" --address "127.0.0.1:$PORT" --console-address "127.0.0.1:$CONSOLE_PORT" \
    --quiet >"$DIR/minio.log" 2>&1 9>&- & # 9>&-: the server must not inherit (and hold) the lock
  echo $! > "$PIDFILE"
  local i=0
  until ready; do
    if ! pid_alive "$PIDFILE"; then tail -n 30 "$DIR/minio.log" >&2; die "minio: exited during startup (log above)"; fi
    i=$((i + 1)); [ "$i" -ge 300 ] && { tail -n 30 "$DIR/minio.log" >&2; die "minio: not ready after 60s"; }
    sleep 0.2
  done
  log "minio: ready (pid $(cat "$PIDFILE"))"
}

stop() { stop_pid "$PIDFILE" minio 20; }

status() { pid_alive "$PIDFILE" && ready; }

env_() {
  echo "DBCANARY_TEST_S3_ENDPOINT=127.0.0.1:$PORT"
  echo "DBCANARY_TEST_S3_REGION=us-east-1"
  echo "DBCANARY_TEST_S3_ACCESS_KEY_FILE=$ROOT_USER_FILE"
  echo "DBCANARY_TEST_S3_SECRET_KEY_FILE=$ROOT_PASSWORD_FILE"
  echo "DBCANARY_TEST_S3_PORT=$PORT"
}

case "${1:-}" in
  install) lock; install ;;
  start) lock; start ;;
  stop) lock; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
