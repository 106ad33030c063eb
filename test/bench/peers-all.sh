#!/usr/bin/env bash
# Every side-by-side comparison of docs/measurements.md in one go: each peer
# script (test/bench/peer-*.sh) with each shape, with the server sharing the
# cores (PIN=0) and then on its own CPU (PIN=1), ROUNDS alternating rounds
# each. Writes every script's whole output to $OUT/<script>-<shape>-pin<P>.log
# and a summary, $OUT/summary.md: the date, the commit, the command, the
# load average before and after each script, its median and per-round
# ratios and how busy the server was in each round, ready to paste into docs/evidence/measurements.md.
#
#   make bench-peers                     (or test/bench/peers-all.sh)
#   PINS=1 RUNS="cassandra:read cassandra:floor" test/bench/peers-all.sh
#
# Env: RUNS (space-separated SCRIPT:SHAPE, the shape's words joined by
# commas, e.g. s3:get,4KiB,8; default: every shape but s3 bandwidth, which
# moves gigabytes), PINS (default "0 1"), ROUNDS (default 3), BENCH_OUT (where
# everything goes), PEER_DIR (where the peer scripts are; tests). A script
# that fails is recorded as failed and the others still run; the exit status
# is non-zero when any failed. 16 script runs with both PINS (the PIN=0 half took 34 min on 7 Dec 2026;
# each prints its length in the summary); run it on a quiet machine: a
# ratio on a loaded one is not a verdict.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEER_DIR=${PEER_DIR:-$HERE}
RUNS=${RUNS:-rabbitmq:throughput rabbitmq:floor s3:get,4KiB,8 s3:put,4KiB,8 s3:floor opensearch: cassandra:read cassandra:floor}
PINS=${PINS:-0 1}
export ROUNDS=${ROUNDS:-3}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
STACK_DIR=${DBCANARY_STACK_DIR:-/var/tmp/dbcanary-stack}
OUT=${BENCH_OUT:-$STACK_DIR/peers/out/all-$STAMP}
mkdir -p "$OUT"
SUM=$OUT/summary.md
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

{
  echo "## Side by side with the peer tools, $(date -u '+%-d %b %Y %H:%M') UTC"
  echo
  echo "Commit $commit, $(nproc) CPUs, ROUNDS=$ROUNDS, PINS=\"$PINS\"; load average at the start $(loadavg)."
  echo "Command: \`RUNS=\"$RUNS\" PINS=\"$PINS\" ROUNDS=$ROUNDS test/bench/peers-all.sh\`; every output in \`$OUT\`."
  echo
} > "$SUM"

failed=0
for pin in $PINS; do
  for run in $RUNS; do
    script=${run%%:*}
    shape=${run#*:}
    IFS=, read -r -a args <<< "$shape"
    name="$script-${shape//,/-}"; name=${name%-}
    log=$OUT/$name-pin$pin.log
    cmd="PIN=$pin ROUNDS=$ROUNDS test/bench/peer-$script.sh${args[*]:+ ${args[*]}}"
    printf '[peers-all] %s (load %s)\n' "$cmd" "$(loadavg)" >&2
    l0=$(loadavg); t0=$(date +%s)
    rc=0
    PIN=$pin BENCH_OUT=$OUT/$name-pin$pin "$PEER_DIR/peer-$script.sh" "${args[@]}" > "$log" 2>&1 || rc=$?
    l1=$(loadavg); secs=$(($(date +%s) - t0))
    {
      echo "### \`$cmd\`"
      echo
      echo "${secs}s; load average $l0 before, $l1 after; log \`$log\`."
      echo
      if [ "$rc" != 0 ]; then
        failed=1
        echo "**Failed** (exit $rc); the log's last lines:"
        echo
        echo '```'
        tail -5 "$log"
        echo '```'
      else
        echo '```'
        grep -E '^(median of|every round|no round gave)' "$log" || echo "(no median line: see the log)"
        grep -E 'busy \(% of one core\)' "$log" || true
        echo '```'
      fi
      echo
    } >> "$SUM"
  done
done
cat "$SUM"
exit "$failed"
