#!/usr/bin/env bash
# Rama's Cassandra benchmarks (rama-vs-mongodb-cassandra.txt) on two private
# single nodes that differ only in commitlog_sync (periodic and batch):
# `dbcanary bench --profile cassandra-maxwrite` and `cassandra-readwrite`
# against each, alternating (periodic first in odd rounds, batch first in
# even ones), ROUNDS times, then our throughput ratio
# batch/periodic beside the one Rama published.
#
#   test/bench/rama-cassandra.sh [maxwrite|readwrite|both]
#
# Env: ROUNDS (2), SECS (20, each measured stage), ROWS (readwrite's rows,
# 20000), PERIODIC_HOST / BATCH_HOST (127.0.0.52 / 127.0.0.51: loopback
# addresses of your own), DBCANARY_STACK_DIR (the nodes live in
# rama-periodic/ and rama-batch/ under it), KEEP=1 leaves the nodes running.
# The nodes share this machine's cores with dbcanary: compare the two modes
# with each other, not with Rama's absolute figures (8 GiB m6gd.large).
source "$(dirname "$0")/peers-lib.sh"
WHAT=${1:-both}; ROUNDS=${ROUNDS:-2}; SECS=${SECS:-20}; ROWS=${ROWS:-20000}
case $WHAT in maxwrite|readwrite|both) ;; *) sed -n '2,16p' "$0"; exit 2 ;; esac
declare -A HOST=([periodic]=${PERIODIC_HOST:-127.0.0.52} [batch]=${BATCH_HOST:-127.0.0.51})
export DBCANARY_CASSANDRA_SHARED_DIR=${DBCANARY_CASSANDRA_SHARED_DIR:-$STACK_DIR/cassandra-5.0.9}

# node MODE ACTION: cassandra.sh for the node of that commitlog_sync.
node() {
  DBCANARY_STACK_DIR=$STACK_DIR/rama-$1 DBCANARY_CASSANDRA_LISTEN=${HOST[$1]} DBCANARY_CASSANDRA_COMMITLOG_SYNC=$1 \
    DBCANARY_CASSANDRA_CLUSTER_NAME=rama-$1 bash "$ROOT/test/stack/cassandra.sh" "$2"
}
for m in periodic batch; do node $m start >&2 || die "cassandra ($m) did not start"; done
[ "${KEEP:-}" = 1 ] || trap 'for m in periodic batch; do node $m stop >&2; done' EXIT

DBC=$(dbcanary_bin)
cfg=$OUT/rama.yaml
{
  echo "global: {instance_id: rama}"
  echo "targets:"
  for m in periodic batch; do
    echo "  - {name: $m, backend: cassandra, cassandra: {hosts: [\"${HOST[$m]}:9042\"], username: cassandra, password_file: \"$STACK_DIR/rama-$m/cassandra/password\", replication: {class: SimpleStrategy, replication_factor: 1}}}"
  done
} > "$cfg"

# run PROFILE MODE ROUND: one bench run; prints its write (or op) throughput
# and its failed ops (a loaded node times writes out: exit 1, still measured).
run() {
  local j=$OUT/$1-$2-$3.json extra=() rc=0
  [ "$1" = cassandra-readwrite ] && extra=(--param rows="$ROWS")
  log "round $3: dbcanary bench --profile $1 --target $2 --duration ${SECS}s ${extra[*]}  (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$DBC" bench --config.file "$cfg" --profile "$1" --target "$2" --duration "${SECS}s" "${extra[@]}" --json "$j" \
    > "$OUT/$1-$2-$3.txt" 2> "$OUT/$1-$2-$3.err" || rc=$?
  [ "$rc" -le 1 ] && [ -s "$j" ] || die "dbcanary bench failed (exit $rc): $(tail -3 "$OUT/$1-$2-$3.err")"
  grep -q "commitlog_sync of the node that answered: $2" "$OUT/$1-$2-$3.txt" || die "node $2 does not report commitlog_sync $2"
  # writes/s: batch_insert moves a batch of rows; readwrite counts every op.
  jsonq "$j" "'%f %d' % (sum(o['throughput_ops_per_s'] * (int(dict((p['name'], p['value']) for p in r['params']).get('batch', 1)) if o['op'] == 'batch_insert' else 1) for s in r['stages'] if not s.get('setup') for o in s['ops']), r['failed'])"
}

# compare PROFILE UNIT RAMA: alternate the modes ROUNDS times, then the table.
compare() {
  local -a per bat pf bf
  local t f
  for i in $(seq 1 "$ROUNDS"); do
    # Odd rounds start with periodic, even ones with batch: neither mode
    # always runs right after the other's writes.
    local order=(periodic batch)
    [ $((i % 2)) = 0 ] && order=(batch periodic)
    for m in "${order[@]}"; do
      read -r t f < <(run "$1" "$m" "$i") && [ -n "$t" ] || die "run $i of $1 on $m failed"
      if [ "$m" = periodic ]; then per+=("$t"); pf+=("$f"); else bat+=("$t"); bf+=("$f"); fi
    done
  done
  echo
  echo "$1: $2, ${SECS}s per run, alternating, $ROUNDS rounds; outputs in $OUT"
  printf '%-8s %16s %16s %10s   %s\n' round periodic batch batch/periodic "failed ops (periodic / batch)"
  for i in $(seq 0 $((ROUNDS - 1))); do
    printf '%-8s %16s %16s %9sx   %s / %s\n' $((i + 1)) "$(fmtn "${per[$i]}")" "$(fmtn "${bat[$i]}")" "$(ratio "${bat[$i]}" "${per[$i]}")" "${pf[$i]}" "${bf[$i]}"
  done
  local mp mb
  mp=$(printf '%s\n' "${per[@]}" | awk '{ s += $1 } END { print s / NR }')
  mb=$(printf '%s\n' "${bat[@]}" | awk '{ s += $1 } END { print s / NR }')
  printf '%-8s %16s %16s %9sx\n' mean "$(fmtn "$mp")" "$(fmtn "$mb")" "$(ratio "$mb" "$mp")"
  echo "Rama (published, charts only): batch/periodic $3"
}
if [ "$WHAT" != readwrite ]; then
  compare cassandra-maxwrite "writes/s (batches of 100, 1000 writes in flight)" "about 0.4 (Rama 2.5x batch, a little below periodic)"
fi
if [ "$WHAT" != maxwrite ]; then
  compare cassandra-readwrite "ops/s (50 % reads, half of them misses; 1000 pairs in flight; $ROWS rows loaded)" "a little above 1 (periodic slightly worse than batch; 250M rows)"
fi
