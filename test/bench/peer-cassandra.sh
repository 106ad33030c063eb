#!/usr/bin/env bash
# latte 0.29.0 (the Cassandra load tool that installs here: crates.io
# `latte-cli`, Rust, scylla driver) and `dbcanary bench --profile ycsb-a`
# reading single partitions by key on the local Cassandra, same shape, one
# run each, then both figures and the ratio (dbcanary / latte).
#
#   test/bench/peer-cassandra.sh floor   point reads at 10 op/s, 1 in flight, 20 s (the canary rate)
#   test/bench/peer-cassandra.sh read    point reads, 8 in flight, closed loop, 20 s
#
# Both read at LOCAL_QUORUM (latte's default, dbcanary's default) with
# replication factor 1, prepared statements, one connection pool. latte reads
# a 1-column table (`latte.basic`, 10 000 rows it loads first); dbcanary's
# ycsb-a reads its 1 KiB rows and compares every byte with what it wrote
# (latte does not look).
#
# Env: SECS (run length), PEERS (tool cache), BENCH_OUT (where outputs go).
# The first run builds latte with cargo (about 7-12 min on 2 cores, ~1.1 GB
# under $PEERS); it needs cargo (rustup) and pkg-config/libssl-dev.
source "$(dirname "$0")/peers-lib.sh"
MODE=${1:-floor}; SECS=${SECS:-20}
case $MODE in
  floor) latte_shape=(-r 10 -p 1 -t 1); dbc_shape=(--workers 1 --rate 10) ;;
  read)  latte_shape=(-p 8 -t 1);       dbc_shape=(--workers 8) ;;
  *) sed -n '2,18p' "$0"; exit 2 ;;
esac
install_latte
stack_env cassandra
PW=$(cat "$DBCANARY_TEST_CASSANDRA_PASSWORD_FILE")
HOSTPORT=$DBCANARY_TEST_CASSANDRA_HOST:$DBCANARY_TEST_CASSANDRA_PORT
DBC=$(dbcanary_bin)
cfg=$OUT/cassandra.yaml
cat > "$cfg" <<CONF
global: {instance_id: peers}
targets:
  - name: cassandra
    backend: cassandra
    cassandra:
      hosts: ["$DBCANARY_TEST_CASSANDRA_HOST"]
      port: $DBCANARY_TEST_CASSANDRA_PORT
      local_dc: "$DBCANARY_TEST_CASSANDRA_DC"
      username: "$DBCANARY_TEST_CASSANDRA_USER"
      password_file: "$DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"
      keyspace: dbcanary_peers
      replication: {class: SimpleStrategy, replication_factor: 1}
      profile: ycsb_a
CONF

# latte writes a log file into its working directory: run it in $OUT.
lt() { (cd "$OUT" && CASSANDRA_USER=$DBCANARY_TEST_CASSANDRA_USER CASSANDRA_PASSWORD=$PW timeout $((SECS + 120)) "$LATTE" "$@" 2>&1) | sed -u 's/\x1b\[[0-9;]*[A-Za-z]//g'; }
log "latte schema + load read.rn (10000 rows) on $HOSTPORT"
lt schema "$LATTE_WL/read.rn" -P rows=10000 "$HOSTPORT" > "$OUT/latte-schema.txt" || die "latte schema: $(tail -5 "$OUT/latte-schema.txt")"
lt load "$LATTE_WL/read.rn" -P rows=10000 -q "$HOSTPORT" > "$OUT/latte-load.txt" || die "latte load: $(tail -5 "$OUT/latte-load.txt")"
log "latte run read.rn -d ${SECS}s ${latte_shape[*]}"
lt run "$LATTE_WL/read.rn" -P rows=10000 -d "${SECS}s" "${latte_shape[@]}" -q -o "$OUT/latte-$MODE.json" "$HOSTPORT" > "$OUT/latte-$MODE.txt" \
  || die "latte run: $(tail -5 "$OUT/latte-$MODE.txt")"
# Throughput and the cycle latency percentiles (ms) from latte's JSON report.
read -r l_rate l_p50 l_p99 l_n < <(python3 - "$OUT/latte-$MODE.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
res = r["result"]
# r["percentiles"] names the percentiles; each latency lists their values (ms) in that order.
at = {p: i for i, p in enumerate(r["percentiles"])}
lat = res["cycle_latency"]["percentiles"]
print(res["cycle_throughput"]["value"], lat[at[50.0]]["value"], lat[at[99.0]]["value"], res["cycle_count"])
PY
) || die "cannot read latte's report $OUT/latte-$MODE.json"

log "dbcanary bench --profile ycsb-a --mix read=1 ${dbc_shape[*]} --duration ${SECS}s"
"$DBC" bench --config.file "$cfg" --profile ycsb-a --mix read=1 "${dbc_shape[@]}" --duration "${SECS}s" --warmup 2s \
  --json "$OUT/dbcanary-$MODE.json" --html "$OUT/dbcanary-$MODE.html" > "$OUT/dbcanary-$MODE.txt" 2> "$OUT/dbcanary-$MODE.err" \
  || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-$MODE.err")"
J=$OUT/dbcanary-$MODE.json
op() { jsonq "$J" "[o for s in r['stages'] if not s.get('setup') for o in s['ops'] if o['op'] == 'read'][0]$1"; }
us() { awk -v v="$1" 'BEGIN { printf "%.0f", v * 1000 }'; }

echo
echo "Cassandra side by side: point reads, $MODE (${latte_shape[*]}), ${SECS}s; outputs in $OUT"
header "figure" "latte"
row "throughput (op/s)" "$l_rate" "$(op "['throughput_ops_per_s']")"
row "latency p50 (µs, from the schedule)" "$(us "$l_p50")" "$(us "$(op "['latency_ms']['p50']")")"
row "latency p99 (µs)" "$(us "$l_p99")" "$(us "$(op "['latency_ms']['p99']")")"
row "  dbcanary service time p50 (µs)" "$(us "$l_p50")" "$(us "$(op "['service_time_ms']['p50']")")"
echo "latte cycles: $l_n; dbcanary: $(op "['ok']") ok (read back and compared byte for byte), $(jsonq "$J" "r['failed']") failed"
