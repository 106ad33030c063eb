# Shared by test/bench/peer-*.sh: install the reference tools (cached under
# $PEERS, default $DBCANARY_STACK_DIR/peers), build dbcanary, write a config
# for the local stack, and print figures side by side. Source it.
#
# Pitfalls these functions avoid (see ../shared/peers/README.md):
# - PerfTest 2.23.0 is not on Maven Central: 2.22.1, classpath resolved once.
# - warp: the Go proxy serves v1.0.0 only; the checksum DB has no entry
#   (GONOSUMDB) and `go install` dies on the deprecation look-up: build the
#   module zip with its own go.mod.
# - opensearch-benchmark writes ~/.benchmark: HOME and BENCHMARK_HOME are
#   redirected; it prints its table only on a TTY: --results-file.
# - latte: only on crates.io (cargo install, --locked); its workloads are
#   the crate's workloads/basic/*.rn, copied from the cargo registry.
# - Every tool binds to 127.0.0.1 targets only; runs are wrapped in timeout.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STACK_DIR=${DBCANARY_STACK_DIR:-/var/tmp/dbcanary-stack}
PEERS=${PEERS:-$STACK_DIR/peers}
OUT=${BENCH_OUT:-$PEERS/out/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$PEERS/bin" "$OUT"

log() { printf '[peers] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# dbcanary_bin: the binary of this checkout, built once per run.
dbcanary_bin() {
  local bin=$OUT/dbcanary
  if [ ! -x "$bin" ]; then
    (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/dbcanary) || die "go build"
  fi
  echo "$bin"
}

install_perftest() {
  local v=2.22.1 dir=$PEERS/perftest
  CP_FILE=$dir/perftest-$v.classpath
  [ -s "$CP_FILE" ] && return 0
  mkdir -p "$dir"
  cat > "$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.peers</groupId><artifactId>perftest-classpath</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies><dependency><groupId>com.rabbitmq</groupId><artifactId>perf-test</artifactId><version>$v</version></dependency></dependencies>
</project>
POM
  log "perftest: resolving com.rabbitmq:perf-test:$v from Maven Central"
  mvn -B -q -f "$dir/pom.xml" -Dmaven.repo.local="$PEERS/m2" dependency:build-classpath -Dmdep.outputFile="$CP_FILE" >&2
}

install_warp() {
  WARP=$PEERS/bin/warp-1.0.0
  [ -x "$WARP" ] && return 0
  log "warp: building github.com/minio/warp@v1.0.0 from the module zip (about a minute)"
  (
    export GOPATH=$PEERS/gopath GOMODCACHE=$PEERS/gopath/pkg/mod GOCACHE=$PEERS/gocache
    export GOFLAGS="-buildvcs=false -modcacherw" GONOSUMDB=github.com/minio/warp
    dir=$(go mod download -json github.com/minio/warp@v1.0.0 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] || exit 1
    rm -rf "$PEERS/src/warp-1.0.0" && mkdir -p "$PEERS/src" && cp -r "$dir" "$PEERS/src/warp-1.0.0" && chmod -R u+w "$PEERS/src/warp-1.0.0"
    cd "$PEERS/src/warp-1.0.0" && go build -trimpath -ldflags "-s -w -X github.com/minio/warp/pkg.Version=1.0.0" -o "$WARP" .
  ) >&2 || die "warp build"
}

install_osb() {
  OSB_VENV=$PEERS/osb-venv
  [ -x "$OSB_VENV/bin/opensearch-benchmark" ] && return 0
  log "opensearch-benchmark: pip install opensearch-benchmark==2.4.0 into $OSB_VENV"
  python3 -m venv "$OSB_VENV" && "$OSB_VENV/bin/pip" install -q opensearch-benchmark==2.4.0 >&2
}

install_latte() {
  LATTE=$PEERS/latte/bin/latte; LATTE_WL=$PEERS/latte-workloads
  if [ ! -x "$LATTE" ]; then
    command -v cargo >/dev/null || die "latte needs cargo (rustup) to build"
    log "latte: cargo install latte-cli@0.29.0 --locked (about 7-12 min on 2 cores, once)"
    CARGO_HOME=$PEERS/cargo-home CARGO_TARGET_DIR=$PEERS/cargo-target \
      cargo install latte-cli@0.29.0 --locked --root "$PEERS/latte" -j 2 >&2 || die "latte build"
  fi
  if [ ! -s "$LATTE_WL/read.rn" ]; then
    mkdir -p "$LATTE_WL" && cp "$PEERS"/cargo-home/registry/src/*/latte-cli-0.29.0/workloads/basic/*.rn "$LATTE_WL/"
  fi
}

# stack_env NAME: export the server's connection facts (starts it if needed; never stops it).
stack_env() {
  bash "$ROOT/test/stack/$1.sh" start >&2
  eval "$(bash "$ROOT/test/stack/$1.sh" env | sed 's/^/export /')"
}

# ratio A B: A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }

# row LABEL PEER OURS: a line of the side-by-side table, with ours / peer.
fmtn() { awk -v v="$1" 'BEGIN { if (v == "" || v !~ /^[0-9.eE+-]+$/) print "-"; else if (v == int(v)) printf "%d", v; else printf "%.1f", v }'; }
row() { printf '%-44s %14s %14s %8sx\n' "$1" "$(fmtn "$2")" "$(fmtn "$3")" "$(ratio "$3" "$2")"; }
header() { printf '%-44s %14s %14s %9s\n' "$1" "$2" "dbcanary" "ratio"; }

# jq-free JSON reading of a bench report: jsonq FILE PYTHON-EXPR (r is the report).
jsonq() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# Where a side-by-side figure is bound on this 2-core machine: the client and
# the server share the cores, so a client that spends more CPU per op leaves
# less to the server. Each round prints the CPU both spent per 1000 ops.
# children_ticks: user+system CPU (clock ticks) of this script's waited-for
# children so far (every tool run is one, with its threads and children).
children_ticks() { awk '{print $16 + $17}' "/proc/$$/stat"; }
# group_run FILE CMD...: run CMD in a CPU-accounting cgroup of its own and
# write to FILE the CPU ticks that it and every process it started spent,
# those that left its process tree included: opensearch-benchmark's actor
# system daemonizes its workers, which the shell never waits for, so
# children_ticks misses them. FILE gets "-" when no cgroup can be made here
# (not root, no cpuacct controller and no cgroup v2). Returns CMD's status.
group_run() {
  local file=$1 cg="" kind="" rc=0 hz; shift
  hz=$(getconf CLK_TCK)
  if [ -w /sys/fs/cgroup/cpuacct ]; then
    cg=/sys/fs/cgroup/cpuacct/dbcanary-peers-$$-$RANDOM kind=v1
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -w /sys/fs/cgroup ]; then
    cg=/sys/fs/cgroup/dbcanary-peers-$$-$RANDOM kind=v2
  fi
  if [ -z "$cg" ] || ! mkdir "$cg" 2>/dev/null; then
    "$@" || rc=$?
    echo - > "$file"; return $rc
  fi
  (echo "$BASHPID" > "$cg/cgroup.procs" 2>/dev/null || echo "moved=no" > "$file.why"; exec "$@") || rc=$?
  # The daemonized workers end after the command: wait (up to 30 s) until the
  # cgroup is empty so that their last CPU is counted too.
  for _ in $(seq 1 150); do [ -n "$(cat "$cg/cgroup.procs" 2>/dev/null)" ] || break; sleep 0.2; done
  if [ -e "$file.why" ]; then
    echo - > "$file"; rm -f "$file.why"
  elif [ "$kind" = v1 ]; then
    awk -v hz="$hz" '{ printf "%.0f\n", $1 * hz / 1e9 }' "$cg/cpuacct.usage" > "$file"
  else
    awk -v hz="$hz" '$1 == "usage_usec" { printf "%.0f\n", $2 * hz / 1e6 }' "$cg/cpu.stat" > "$file"
  fi
  rmdir "$cg" 2>/dev/null || true
  return $rc
}
# server_ticks NAME: user+system CPU ticks of the server NAME (test/stack/NAME.sh,
# its pid file $STACK_DIR/NAME/NAME.pid) so far, every thread; 0 when unknown.
server_ticks() {
  local pid
  pid=$(cat "$STACK_DIR/$1/$1.pid" 2>/dev/null) && [ -r "/proc/$pid/stat" ] || { echo 0; return; }
  awk '{print $14 + $15}' "/proc/$pid/stat"
}
# medians PEER DESC COLUMN...: read one line of ratios a round on stdin (one
# column each, "-" where a figure was missing) and print the median of each
# column and every round's ratios. DESC says which way is better.
medians() {
  python3 -c '
import statistics, sys
peer, desc, cols = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = [[float(x) for x in l.split()] for l in sys.stdin if l.split() and "-" not in l.split()]
if rows:
    m = [statistics.median(c) for c in zip(*rows)]
    print("median of %d rounds, dbcanary / %s: %s (%s)" % (len(rows), peer, ", ".join("%s %.2fx" % (c, v) for c, v in zip(cols, m)), desc))
    print("every round (%s): %s" % (" ".join(c.replace(" ", "-") for c in cols), "; ".join(" ".join("%.2fx" % v for v in r) for r in rows)))
else:
    print("no round gave every figure: no median (see the rounds above)")' "$@"
}

# uptime_s: seconds since boot (the wall clock of a round's parts).
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# busy_pct TICKS FROM TO: CPU ticks over the wall time FROM..TO (uptime_s) as
# a percentage of one core: near 100 for a server pinned to one CPU (PIN=1)
# says the server was the limit, whichever tool drove it.
busy_pct() { awk -v t="$1" -v a="$2" -v b="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN { if (b - a <= 0) print "-"; else printf "%.0f", t / hz / (b - a) * 100 }'; }
# cpu_s TICKS: CPU seconds.
cpu_s() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }'; }
# cpu_per_kop TICKS OPS: CPU milliseconds per 1000 ops.
cpu_per_kop() { awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { if (n + 0 == 0) print "-"; else printf "%.1f", t * 1000 / hz / n * 1000 }'; }

# PIN=1 runs the server on CPU 0 and the tools on CPU 1, as a client and a
# server on two machines: neither tool takes the server's CPU, so the figure
# compares the clients, not how much CPU each leaves the server.
# pin_server NAME: move every thread of the server to CPU 0 (and back at exit).
# Tools are started through $CLIENT (taskset -c 1 when pinned).
CLIENT=()
pin_server() {
  [ "${PIN:-0}" = 1 ] || return 0
  command -v taskset >/dev/null || die "PIN=1 needs taskset (util-linux)"
  [ "$(nproc)" -ge 2 ] || die "PIN=1 needs 2 CPUs"
  local pid
  pid=$(cat "$STACK_DIR/$1/$1.pid") || die "PIN=1: no pid file for $1"
  taskset -a -c -p 0 "$pid" >/dev/null || die "taskset $1"
  # shellcheck disable=SC2064 # the pid is fixed now
  trap "taskset -a -c -p 0-$(($(nproc) - 1)) $pid >/dev/null 2>&1 || true" EXIT
  CLIENT=(taskset -c 1)
  log "PIN=1: $1 (pid $pid) on CPU 0, the tools on CPU 1"
}
