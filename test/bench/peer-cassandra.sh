#!/usr/bin/env bash
# latte 0.29.0 (the Cassandra load tool that installs here: crates.io
# `latte-cli`, Rust, scylla driver) and `dbcanary bench --profile ycsb-a`
# reading single rows by key on the local Cassandra, like for like: the same
# YCSB usertable row (a varchar key, 10 varchar fields of 100 bytes, 1 KiB),
# the same number of rows, the same concurrency. The two tools alternate
# ROUNDS times (default 3); each round prints both figures and the ratio
# (dbcanary / latte), the last line the median ratios.
#
#   test/bench/peer-cassandra.sh floor   point reads at 10 op/s, 1 in flight (the canary rate)
#   test/bench/peer-cassandra.sh read    point reads, 8 in flight, closed loop
#
# latte runs a workload this script writes ($OUT/ycsb-read.rn: latte's own
# basic/read.rn reads a one-column bigint row, 8 bytes, which is what the
# 0.71x of 24 Nov 2026 compared with dbcanary's 1 KiB row); it loads ROWS rows
# of 10 x latte::text(seed, 100) and reads `user<hash(i) % ROWS>`. dbcanary's
# ycsb-a loads ROWS records (--param records=ROWS), then reads them
# (--mix read=1) and compares every field byte for byte with what it wrote
# (latte does not look). Both read at LOCAL_QUORUM (latte's default,
# dbcanary's default) with replication factor 1, prepared statements, one
# connection pool.
#
# Each round also prints the CPU each tool and the server spent per 1000 ops
# (dbcanary's count includes its load of ROWS records and the 2 s warm-up:
# an overstatement of up to 10 %): on 2 shared cores a client that spends
# more CPU per op leaves less to Cassandra. PIN=1 runs Cassandra on CPU 0 and
# the tools on CPU 1, as on two machines.
#
# Env: SECS (run length, default 20), ROUNDS (default 3), ROWS (default 1000),
# PIN (1: server and tools on separate CPUs), PEERS (tool cache), BENCH_OUT (where outputs go). The first run builds latte
# with cargo (about 7-12 min on 2 cores, ~1.1 GB under $PEERS); it needs cargo
# (rustup) and pkg-config/libssl-dev.
source "$(dirname "$0")/peers-lib.sh"
MODE=${1:-floor}; SECS=${SECS:-20}; ROUNDS=${ROUNDS:-3}; ROWS=${ROWS:-1000}
case $MODE in
  floor) latte_shape=(-r 10 -p 1 -t 1); dbc_shape=(--workers 1 --rate 10) ;;
  read)  latte_shape=(-p 8 -t 1);       dbc_shape=(--workers 8) ;;
  *) sed -n '2,27p' "$0"; exit 2 ;;
esac
install_latte
stack_env cassandra
pin_server cassandra
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

# The YCSB usertable row for latte: the table dbcanary's ycsb_a profile creates
# (probes/cassandra/schema.go), loaded with 10 fields of FIELD_LENGTH characters.
WL=$OUT/ycsb-read.rn
fields=$(for f in 0 1 2 3 4 5 6 7 8 9; do printf 'field%d, ' $f; done); fields=${fields%, }
values=$(for f in 0 1 2 3 4 5 6 7 8 9; do printf 'latte::text(i * 10 + %d, FIELD_LENGTH), ' $f; done); values=${values%, }
cat > "$WL" <<RN
//! dbcanary peer-cassandra.sh: YCSB usertable point reads, 10 varchar fields of FIELD_LENGTH bytes.
const ROW_COUNT = latte::param!("rows", 1000);
const FIELD_LENGTH = latte::param!("field_length", 100);
const INSERT = "insert";
const READ = "read";
const KEYSPACE = "latte";
const TABLE = "usertable";

pub async fn schema(ctx) {
    ctx.execute(\`CREATE KEYSPACE IF NOT EXISTS \${KEYSPACE} WITH REPLICATION = { 'class' : 'SimpleStrategy', 'replication_factor' : 1 }\`).await?;
    ctx.execute(\`DROP TABLE IF EXISTS \${KEYSPACE}.\${TABLE}\`).await?;
    ctx.execute(\`CREATE TABLE \${KEYSPACE}.\${TABLE}(y_id varchar PRIMARY KEY, ${fields//,/ varchar,} varchar)\`).await?;
}

pub async fn erase(ctx) {
    ctx.execute(\`TRUNCATE TABLE \${KEYSPACE}.\${TABLE}\`).await
}

pub async fn prepare(ctx) {
    ctx.load_cycle_count = ROW_COUNT;
    ctx.prepare(INSERT, \`INSERT INTO \${KEYSPACE}.\${TABLE}(y_id, $fields) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)\`).await?;
    ctx.prepare(READ, \`SELECT $fields FROM \${KEYSPACE}.\${TABLE} WHERE y_id = ?\`).await?;
}

pub async fn load(ctx, i) {
    ctx.execute_prepared(INSERT, [\`user\${i}\`, $values]).await?
}

pub async fn run(ctx, i) {
    ctx.execute_prepared(READ, [\`user\${latte::hash(i) % ROW_COUNT}\`]).await?
}
RN

# latte writes a log file into its working directory: run it in $OUT.
lt() { (cd "$OUT" && CASSANDRA_USER=$DBCANARY_TEST_CASSANDRA_USER CASSANDRA_PASSWORD=$PW "${CLIENT[@]}" timeout $((SECS + 120)) "$LATTE" "$@" 2>&1) | sed -u 's/\x1b\[[0-9;]*[A-Za-z]//g'; }
log "latte schema + load $WL ($ROWS rows of 10 x 100 bytes) on $HOSTPORT"
lt schema "$WL" -P rows="$ROWS" "$HOSTPORT" > "$OUT/latte-schema.txt" || die "latte schema: $(tail -5 "$OUT/latte-schema.txt")"
lt load "$WL" -P rows="$ROWS" -q "$HOSTPORT" > "$OUT/latte-load.txt" || die "latte load: $(tail -5 "$OUT/latte-load.txt")"

# latte_round N: one latte run; prints throughput, p50 and p99 (ms) and the cycle count.
latte_round() {
  local j=$OUT/latte-$MODE-$1.json
  log "round $1: latte run $(basename "$WL") -P rows=$ROWS -d ${SECS}s ${latte_shape[*]}"
  lt run "$WL" -P rows="$ROWS" -d "${SECS}s" "${latte_shape[@]}" -q -o "$j" "$HOSTPORT" > "$OUT/latte-$MODE-$1.txt" \
    || die "latte run: $(tail -5 "$OUT/latte-$MODE-$1.txt")"
  # r["percentiles"] names the percentiles; each latency lists their values (ms) in that order.
  python3 - "$j" <<'PY' || die "cannot read latte's report $j"
import json, sys
r = json.load(open(sys.argv[1]))
res = r["result"]
at = {p: i for i, p in enumerate(r["percentiles"])}
lat = res["cycle_latency"]["percentiles"]
errs = res.get("cycle_error_count", 0)
if errs:
    sys.exit("latte reported %s failed cycles" % errs)
print(res["cycle_throughput"]["value"], lat[at[50.0]]["value"], lat[at[99.0]]["value"], res["cycle_count"])
PY
}

# dbcanary_round N: one dbcanary run; prints throughput, p50 and p99 (ms), ok and failed.
dbcanary_round() {
  local j=$OUT/dbcanary-$MODE-$1.json
  log "round $1: dbcanary bench --profile ycsb-a --param records=$ROWS --mix read=1 ${dbc_shape[*]} --duration ${SECS}s"
  "${CLIENT[@]}" "$DBC" bench --config.file "$cfg" --profile ycsb-a --param records="$ROWS" --mix read=1 "${dbc_shape[@]}" --duration "${SECS}s" --warmup 2s \
    --json "$j" > "$OUT/dbcanary-$MODE-$1.txt" 2> "$OUT/dbcanary-$MODE-$1.err" \
    || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-$MODE-$1.err")"
  jsonq "$j" "' '.join(str(x) for x in [[o['throughput_ops_per_s'], o['latency_ms']['p50'], o['latency_ms']['p99'], o['ok']] for s in r['stages'] if not s.get('setup') for o in s['ops'] if o['op'] == 'read'][0] + [r['failed'], sum(o['ok'] for s in r['stages'] for o in s['ops']) + r['failed']])"
}

us() { awk -v v="$1" 'BEGIN { printf "%.0f", v * 1000 }'; }
echo
echo "Cassandra side by side, like for like: point reads of 1 KiB YCSB rows ($ROWS), $MODE (latte ${latte_shape[*]}; dbcanary ${dbc_shape[*]}), ${SECS}s, $ROUNDS rounds alternating, PIN=${PIN:-0}; outputs in $OUT"
ratios=()
for n in $(seq 1 "$ROUNDS"); do
  c0=$(children_ticks); t0=$(uptime_s); s0=$(server_ticks cassandra)
  l=$(latte_round "$n")
  c1=$(children_ticks); t1=$(uptime_s); s1=$(server_ticks cassandra)
  d=$(dbcanary_round "$n")
  c2=$(children_ticks); t2=$(uptime_s); s2=$(server_ticks cassandra)
  read -r l_rate l_p50 l_p99 l_n <<< "$l"
  read -r d_rate d_p50 d_p99 d_ok d_failed d_all <<< "$d"
  header "round $n (load $(cut -d' ' -f1 /proc/loadavg))" "latte"
  row "throughput (op/s)" "$l_rate" "$d_rate"
  row "latency p50 (µs)" "$(us "$l_p50")" "$(us "$d_p50")"
  row "latency p99 (µs)" "$(us "$l_p99")" "$(us "$d_p99")"
  row "client CPU ms per 1000 ops" "$(cpu_per_kop $((c1 - c0)) "$l_n")" "$(cpu_per_kop $((c2 - c1)) "$d_all")"
  row "Cassandra CPU ms per 1000 ops" "$(cpu_per_kop $((s1 - s0)) "$l_n")" "$(cpu_per_kop $((s2 - s1)) "$d_all")"
  row "Cassandra CPU busy (% of one core)" "$(busy_pct $((s1 - s0)) "$t0" "$t1")" "$(busy_pct $((s2 - s1)) "$t1" "$t2")"
  echo "latte cycles: $l_n; dbcanary: $d_ok reads compared byte for byte, $d_failed failed"
  ratios+=("$(ratio "$d_rate" "$l_rate") $(ratio "$d_p50" "$l_p50") $(ratio "$d_p99" "$l_p99")")
done
printf '%s\n' "${ratios[@]}" | medians latte "above 1: faster for throughput, slower for latency" throughput p50 p99
