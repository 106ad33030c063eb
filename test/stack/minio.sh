#!/usr/bin/env bash
# MinIO (S3) for tests and the demo: built from the Go module proxy at a pinned
# version (MinIO has no semver tags the proxy serves, so the pin is a
# pseudo-version: the proxy's @latest on 2026-11-23, i.e. the commit of
# 2026-02-12). Cached as $STACK_DIR/bin/minio-$VERSION, with
# $STACK_DIR/bin/minio a symlink to the pinned build (tests exec that path):
# changing the pin builds a new binary; a running server keeps its old one
# until its next start. S3 API on
# 127.0.0.1:9000 and console on 127.0.0.1:9001, data under $STACK_DIR/minio.
# Root credentials are generated once into files and passed via environment.
# (MinIO also listens on the other loopback address, [::1]:9000, by design:
# its console talks to the server over loopback. Nothing binds a public address.)
# Usage: minio.sh install|start|stop|status|env|version
source "$(dirname "$0")/lib.sh"

# Bump deliberately: `go list -m github.com/minio/minio@latest` names the newest.
VERSION=${DBCANARY_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
# A private server for heavy loads (the bandwidth profile) on another loopback
# address: MinIO still binds the same port on 127.0.0.1 and [::1] too, so give
# it its own DBCANARY_MINIO_PORT (and console port) as well.
HOST=${DBCANARY_MINIO_HOST:-127.0.0.1}
PORT=${DBCANARY_MINIO_PORT:-9000}
CONSOLE_PORT=${DBCANARY_MINIO_CONSOLE_PORT:-9001}
DIR=$STACK_DIR/minio
BIN=$STACK_DIR/bin/minio-$VERSION
LINK=$STACK_DIR/bin/minio
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

# built_version FILE: the github.com/minio/minio module version a binary was built from.
built_version() {
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/minio/minio" { print $3; exit }'
}

install() {
  case "$VERSION" in
    v*) ;;
    *) die "minio: DBCANARY_MINIO_VERSION must be a module version (vX.Y.Z or a pseudo-version), not '$VERSION'" ;;
  esac
  if [ ! -x "$BIN" ]; then
    mkdir -p "$STACK_DIR/bin" "$DIR/gobin"
    if [ -f "$LINK" ] && [ ! -L "$LINK" ] && [ "$(built_version "$LINK")" = "$VERSION" ]; then
      # A cache from before the pin (unversioned file) built from this very
      # version: keep it (hard link, so $LINK never goes missing meanwhile).
      log "minio: adopting the cached $LINK (built from $VERSION)"
      ln "$LINK" "$BIN" 2>/dev/null || cp -p "$LINK" "$BIN"
    else
      log "minio: building $VERSION from the Go module proxy (takes minutes cold)"
      GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "github.com/minio/minio@$VERSION"
      [ "$(built_version "$DIR/gobin/minio")" = "$VERSION" ] || die "minio: the build does not report module version $VERSION"
      mv "$DIR/gobin/minio" "$BIN"
    fi
  fi
  # Point the stable path at the pinned build (replaced by rename: a server
  # running the old binary is not disturbed).
  if [ "$(readlink "$LINK" 2>/dev/null)" != "minio-$VERSION" ]; then
    ln -sfn "minio-$VERSION" "$LINK.tmp.$$" && mv -Tf "$LINK.tmp.$$" "$LINK"
    log "minio: $LINK -> minio-$VERSION"
  fi
}

ready() {
  # /minio/health/ready answers 200 once the object layer is up (subshell: a
  # refused /dev/tcp redirection must not end this script).
  local line
  line=$( (exec 3<>"/dev/tcp/$HOST/$PORT" &&
    printf 'GET /minio/health/ready HTTP/1.0\r\nHost: %s\r\n\r\n' "$HOST" >&3 &&
    IFS= read -r -t 2 l <&3 && printf '%s' "$l") 2>/dev/null) || return 1
  [[ $line == *" 200 "* ]]
}

start() {
  install
  if pid_alive "$PIDFILE" && ready; then log "minio: already running"; return 0; fi
  if port_open "$HOST" "$PORT"; then die "minio: port $PORT is taken by another process (set DBCANARY_MINIO_PORT)"; fi
  mkdir -p "$DIR/data"
  # The user name is a secret too (MinIO's root access key): generated once.
  if [ ! -s "$ROOT_USER_FILE" ]; then
    local seed; seed=$(secret "$DIR/root-user-seed")
    printf 'dbcanary-%s' "${seed:0:8}" > "$ROOT_USER_FILE"
    chmod 600 "$ROOT_USER_FILE"
  fi
  secret "$ROOT_PASSWORD_FILE" >/dev/null
  log "minio: starting on $HOST:$PORT"
  MINIO_ROOT_USER=$(cat "$ROOT_USER_FILE") MINIO_ROOT_PASSWORD=$(cat "$ROOT_PASSWORD_FILE") \
    MINIO_BROWSER=on MINIO_UPDATE=off \
    nohup "$BIN" server "$DIR/data" --address "$HOST:$PORT" --console-address "$HOST:$CONSOLE_PORT" \
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
  echo "DBCANARY_TEST_S3_ENDPOINT=$HOST:$PORT"
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
  version) echo "$VERSION" ;;
  *) echo "usage: $0 install|start|stop|status|env|version" >&2; exit 2 ;;
esac
