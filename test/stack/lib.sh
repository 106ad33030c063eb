# Shared helpers for the local test stack. Source it; do not run it.
# Every server binds to 127.0.0.1 only, keeps its downloads and data under
# $STACK_DIR (cached between runs), and is stopped by the PID it recorded.
set -euo pipefail

STACK_DIR=${DBCANARY_STACK_DIR:-/var/tmp/dbcanary-stack}
mkdir -p "$STACK_DIR"
chmod 755 "$STACK_DIR"

log() { printf '[stack] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# pid_alive PIDFILE: true if the file names a running process.
pid_alive() {
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# port_open HOST PORT: true if something accepts TCP connections there (sends nothing).
port_open() {
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0 || return 1
}

# wait_port HOST PORT SECONDS [PIDFILE]: wait for the port, failing early if the process died.
wait_port() {
  local host=$1 port=$2 secs=$3 pidfile=${4:-} i=0
  while ! port_open "$host" "$port"; do
    if [ -n "$pidfile" ] && ! pid_alive "$pidfile"; then return 1; fi
    i=$((i + 1)); [ "$i" -ge $((secs * 5)) ] && return 1
    sleep 0.2
  done
}

# stop_pid PIDFILE NAME [SECONDS]: SIGTERM, wait, then SIGKILL.
stop_pid() {
  local pidfile=$1 name=$2 secs=${3:-30} pid i=0
  if ! pid_alive "$pidfile"; then rm -f "$pidfile"; log "$name: not running"; return 0; fi
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -ge $((secs * 5)) ]; then log "$name: still running after ${secs}s, killing"; kill -KILL "$pid" 2>/dev/null || true; fi
    sleep 0.2
  done
  # Remove the file only if it still names the process we stopped: a
  # concurrent start may already have written a newer server's PID.
  [ "$(cat "$pidfile" 2>/dev/null)" = "$pid" ] && rm -f "$pidfile"
  log "$name: stopped (pid $pid)"
}

# stack_lock NAME: serialise install/start/stop of one server across processes
# (test packages and people may drive the same local server at once). The lock
# is fd 9; start a server with 9>&- so it does not inherit and hold it.
stack_lock() {
  mkdir -p "$STACK_DIR/$1"
  exec 9>"$STACK_DIR/$1/.lock"
  flock -w 900 9 || die "$1: could not get $STACK_DIR/$1/.lock within 900s"
}

# apt_install PKG...: install Debian packages when missing. Scripts started
# side by side (make soak-chaos starts its servers in parallel) take turns on
# one machine-wide lock, DBCANARY_APT_LOCK, and look again once they hold it;
# an apt run of someone else's is waited for up to 10 minutes
# (DPkg::Lock::Timeout) instead of failing at once on apt's own lock.
apt_missing() {
  local p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || printf '%s\n' "$p"; done
}
apt_install() {
  [ -z "$(apt_missing "$@")" ] && return 0
  local lock=${DBCANARY_APT_LOCK:-/var/lock/dbcanary-apt.lock}
  [ -w "$(dirname "$lock")" ] || lock=${TMPDIR:-/tmp}/dbcanary-apt.lock
  (
    flock -w 1800 8 || die "apt: could not get $lock within 1800s"
    local missing sudo=""
    mapfile -t missing < <(apt_missing "$@")
    [ ${#missing[@]} -eq 0 ] && exit 0
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    log "installing ${missing[*]} (apt)"
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  ) 8>"$lock"
}

# secret FILE: create a random secret once, print it.
secret() {
  if [ ! -s "$1" ]; then
    mkdir -p "$(dirname "$1")"
    head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$1"
    chmod 600 "$1"
  fi
  cat "$1"
}
