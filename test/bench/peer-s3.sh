#!/usr/bin/env bash
# MinIO warp 1.0.0 and `dbcanary bench --profile s3-sizes` side by side on
# the local MinIO, same shape. get, put and floor alternate the two tools
# ROUNDS times (default 3); each round prints both figures, the ratio
# (dbcanary / warp) and the CPU each tool and MinIO spent per 1000 requests,
# the last lines the median ratios. PIN=1 runs MinIO on CPU 0 and the tools
# on CPU 1. bandwidth runs each tool once.
#
#   test/bench/peer-s3.sh get [SIZE] [CONCURRENCY]   GET, default 4KiB objects, 8 concurrent, 20 s
#   test/bench/peer-s3.sh put [SIZE] [CONCURRENCY]   PUT, same defaults
#   test/bench/peer-s3.sh floor                      GET 4KiB at 10 req/s, 1 concurrent, 30 s
#   test/bench/peer-s3.sh bandwidth [SIZE] [CONC]    Mongoose's bandwidth shape: PUT then GET of 100MiB
#                                                    objects, 100 concurrent, 30 s each (s3-bandwidth)
#
# Env: SECS (run length), ROUNDS (default 3), PIN (1: server and tools on
# separate CPUs), KEYS (canary: warp's keys as deep as dbcanary's, the
# default; own: warp's own), PEERS (tool cache), BENCH_OUT (where outputs go).
# warp reads its latency from each request's start; dbcanary GETs also
# compare every byte read with what was written (warp does not look). GETs
# read 4 objects per concurrent request in both tools (warp's --objects,
# dbcanary's --param objects); PUTs write a new object each time in both.
# bandwidth moves gigabytes: run it against a MinIO of your own
# (DBCANARY_STACK_DIR=... DBCANARY_MINIO_HOST=127.0.0.x DBCANARY_MINIO_PORT=...:
# MinIO binds its port on 127.0.0.1 too), not a shared one.
source "$(dirname "$0")/peers-lib.sh"
OP=${1:-get}; SIZE=${2:-4KiB}; CONC=${3:-8}; ROUNDS=${ROUNDS:-3}
[ "$OP" = bandwidth ] && { SIZE=${2:-100MiB}; CONC=${3:-100}; }
install_warp
stack_env minio
pin_server minio
AK=$(cat "$DBCANARY_TEST_S3_ACCESS_KEY_FILE"); SK=$(cat "$DBCANARY_TEST_S3_SECRET_KEY_FILE")
DBC=$(dbcanary_bin)
cfg=$OUT/s3.yaml
cat > "$cfg" <<CONF
global: {instance_id: peers}
targets:
  - name: s3
    backend: s3
    s3: {endpoint: "http://$DBCANARY_TEST_S3_ENDPOINT", region: "$DBCANARY_TEST_S3_REGION", access_key_id_file: "$DBCANARY_TEST_S3_ACCESS_KEY_FILE", secret_access_key_file: "$DBCANARY_TEST_S3_SECRET_KEY_FILE"}
CONF

# warp_run OP ARGS...: warp OP on the shape (its peak RSS in $OUT/warp-OP.rss, KiB).
warp_run() {
  local op=$1; shift
  log "warp $op --obj.size $SIZE --concurrent $CONC --duration ${SECS}s $*"
  timeout $((SECS + 900)) /usr/bin/time -o "$OUT/warp-$op.rss" -f %M "$WARP" "$op" --host "$DBCANARY_TEST_S3_ENDPOINT" --access-key "$AK" --secret-key "$SK" \
    --bucket warp-peers --obj.size "$SIZE" --concurrent "$CONC" --duration "${SECS}s" --no-color --analyze.v \
    --benchdata "$OUT/warp-$op" "$@" 2>&1 | sed -u 's/\r/\n/g; s/\x1b\[[0-9;]*[A-Za-z]//g' > "$OUT/warp-$op.txt" \
    || die "warp failed: $(tail -5 "$OUT/warp-$op.txt")"
}

# warp_mibs OP: warp's throughput of OP in MiB/s and its op count, from its
# raw data: bytes of the successful ops over first start to last end (with
# 100 MiB x 100 in flight an op outlasts warp's analysis window, and warp
# prints "too few samples" instead of an average).
warp_mibs() {
  zstd -dc "$OUT/warp-$1.csv.zst" | python3 -c '
import sys, csv
from datetime import datetime
def ns(s):
    d, _, f = s.rstrip("Z").partition(".")
    return int(datetime.fromisoformat(d + "+00:00").timestamp()) * 10**9 + int(f.ljust(9, "0")[:9])
op = sys.argv[1].upper(); n = b = 0; t0 = t1 = None
for r in csv.DictReader((l for l in sys.stdin if not l.startswith("#")), delimiter="\t", quoting=csv.QUOTE_NONE):
    if r["op"] != op or r["error"] or not r["end"]:
        continue
    n += 1; b += int(r["bytes"]); s, e = ns(r["start"]), ns(r["end"])
    t0 = s if t0 is None else min(t0, s); t1 = e if t1 is None else max(t1, e)
print(b / 1048576 / ((t1 - t0) / 1e9) if n else 0, n)
' "$1"
}

# bandwidth: warp put and get, then dbcanary's s3-bandwidth (create, then
# read with every byte compared), same size, concurrency and length.
bandwidth() {
  warp_run put
  warp_run get --objects "$CONC"
  log "dbcanary bench --profile s3-bandwidth --param size=$SIZE --param concurrency=$CONC --duration ${SECS}s"
  /usr/bin/time -o "$OUT/dbcanary.rss" -f %M "$DBC" bench --config.file "$cfg" --profile s3-bandwidth --param size="$SIZE" --param concurrency="$CONC" \
    --duration "${SECS}s" --json "$OUT/dbcanary-bandwidth.json" > "$OUT/dbcanary-bandwidth.txt" 2> "$OUT/dbcanary-bandwidth.err" \
    || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-bandwidth.err")"
  local J=$OUT/dbcanary-bandwidth.json
  st() { jsonq "$J" "[o for s in r['stages'] if s['name'] == '$1' for o in s['ops']][0]$2"; }
  echo
  echo "S3 bandwidth side by side: $SIZE objects, $CONC concurrent, ${SECS}s per op; outputs in $OUT"
  local wp wpn wg wgn
  read -r wp wpn < <(warp_mibs put); read -r wg wgn < <(warp_mibs get)
  header "figure" "warp"
  row "PUT (create) MiB/s" "$wp" "$(st create "['mib_per_s']")"
  row "GET (read) MiB/s" "$wg" "$(st read "['mib_per_s']")"
  echo "ops done, PUT + GET: warp $wpn + $wgn, dbcanary $(st create "['ok']") + $(st read "['ok']")"
  row "peak RSS, MiB (whole run)" "$(awk '{ print $1 / 1024 }' "$OUT/warp-get.rss")" "$(awk '{ print $1 / 1024 }' "$OUT/dbcanary.rss")"
  echo "warp RSS is its get run's (put: $(awk '{ printf "%.0f", $1 / 1024 }' "$OUT/warp-put.rss") MiB); dbcanary's report says $(jsonq "$J" "round(r['peak_rss_bytes'] / 1048576, 1)") MiB."
  echo "dbcanary: $(st create "['ok']") created, $(st read "['ok']") read back and compared byte for byte, $(jsonq "$J" "r['failed']") failed"
}
warp_extra=(); dbc_extra=()
[ "$OP" = bandwidth ] && { SECS=${SECS:-30}; bandwidth; exit; }
case $OP in
  get|put) SECS=${SECS:-20} ;;
  floor) SECS=${SECS:-30}; OP=get; SIZE=4KiB; CONC=1; warp_extra=(--rps-limit 10); dbc_extra=(--rate 10) ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
# GET reads from the same number of objects in both tools (dbcanary's
# s3-sizes allows at most 100).
[ "$OP" = get ] && { warp_extra+=(--objects $((CONC * 4 > 100 ? 100 : CONC * 4))); dbc_extra+=(--param objects=$((CONC * 4 > 100 ? 100 : CONC * 4))); }
# Key depth: MinIO walks one directory per "/" of a key, and reads deeper keys
# more slowly (warp with and without a 4-level --prefix: 0.94x, median of 10
# pairs). dbcanary's keys are 6 levels deep (prefix dbcanary/<target>/, then
# <instance>/<run>/<size>/<sequence>: the namespace that keeps instances
# apart); warp's own are 2 (<random>/<name>). KEYS=canary (default) gives warp
# a 4-level prefix, so both tools' objects are 6 levels deep; KEYS=own keeps
# warp's.
KEYS=${KEYS:-canary}
case $KEYS in
  canary) warp_extra+=(--prefix "dbcanary/s3/peers-warp/$(printf '%016x' $$)") ;;
  own) ;;
  *) die "KEYS must be canary or own, not '$KEYS'" ;;
esac
us() { awk -v v="$1" 'BEGIN { printf "%.0f", v * 1000 }'; }

# warp_round N: warp on the shape; its outputs in $OUT/warp-$OP-N.*
warp_round() {
  log "round $1: warp $OP --obj.size $SIZE --concurrent $CONC --duration ${SECS}s ${warp_extra[*]}"
  timeout $((SECS + 120)) "${CLIENT[@]}" "$WARP" "$OP" --host "$DBCANARY_TEST_S3_ENDPOINT" --access-key "$AK" --secret-key "$SK" \
    --bucket warp-peers --obj.size "$SIZE" --concurrent "$CONC" --duration "${SECS}s" --no-color --analyze.v \
    --benchdata "$OUT/warp-$OP-$1" "${warp_extra[@]}" 2>&1 | sed -u 's/\r/\n/g; s/\x1b\[[0-9;]*[A-Za-z]//g' > "$OUT/warp-$OP-$1.txt" \
    || die "warp failed: $(tail -5 "$OUT/warp-$OP-$1.txt")"
}

# warp_figures N: requests measured, µs p50 and p99 and time-to-first-byte
# p50 of the measured op, from warp's raw data (its report rounds to ms).
warp_figures() {
  zstd -dc "$OUT/warp-$OP-$1.csv.zst" | python3 -c '
import sys, csv
from datetime import datetime
def ns(s):
    d, _, f = s.rstrip("Z").partition(".")
    return int(datetime.fromisoformat(d + "+00:00").timestamp()) * 10**9 + int(f.ljust(9, "0")[:9])
op = sys.argv[1].upper(); lat = []; ttfb = []
for r in csv.DictReader((l for l in sys.stdin if not l.startswith("#")), delimiter="\t", quoting=csv.QUOTE_NONE):
    if r["op"] != op or r["error"] or not r["duration_ns"]:
        continue
    lat.append(int(r["duration_ns"]))
    if r.get("first_byte"):
        ttfb.append(ns(r["first_byte"]) - ns(r["start"]))
lat.sort(); ttfb.sort()
q = lambda v, p: v[min(len(v) - 1, round(p / 100 * (len(v) - 1)))] / 1000 if v else 0
print(len(lat), round(q(lat, 50)), round(q(lat, 99)), round(q(ttfb, 50)))
' "$OP"
}

# dbcanary_round N: dbcanary bench on the same shape; its report in $OUT/dbcanary-$OP-N.json
dbcanary_round() {
  log "round $1: dbcanary bench --profile s3-sizes --param sizes=$SIZE --param worker-steps=$CONC --mix $OP=1 --duration ${SECS}s ${dbc_extra[*]}"
  "${CLIENT[@]}" "$DBC" bench --config.file "$cfg" --profile s3-sizes --param sizes="$SIZE" --param worker-steps="$CONC" --mix "$OP=1" --duration "${SECS}s" "${dbc_extra[@]}" \
    --json "$OUT/dbcanary-$OP-$1.json" --html "$OUT/dbcanary-$OP-$1.html" > "$OUT/dbcanary-$OP-$1.txt" 2> "$OUT/dbcanary-$OP-$1.err" \
    || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-$OP-$1.err")"
}

echo
echo "S3 side by side: $OP $SIZE objects, $CONC concurrent, ${SECS}s ${warp_extra[*]}, $ROUNDS rounds alternating, PIN=${PIN:-0}; outputs in $OUT"
ratios=()
for n in $(seq 1 "$ROUNDS"); do
  c0=$(children_ticks); t0=$(uptime_s); s0=$(server_ticks minio)
  warp_round "$n"
  c1=$(children_ticks); t1=$(uptime_s); s1=$(server_ticks minio)
  dbcanary_round "$n"
  c2=$(children_ticks); t2=$(uptime_s); s2=$(server_ticks minio)
  read -r w_n w_p50 w_p99 w_ttfb50 < <(warp_figures "$n")
  w_rate=$(sed -n 's/.*Average: [0-9.]* [KMG]*i*B\/s, \([0-9.]*\) obj\/s.*/\1/p' "$OUT/warp-$OP-$n.txt" | head -1)
  J=$OUT/dbcanary-$OP-$n.json
  op() { jsonq "$J" "[o for s in r['stages'] if not s.get('setup') for o in s['ops']][0]$1"; }
  d_rate=$(op "['throughput_ops_per_s']"); d_p50=$(us "$(op "['latency_ms']['p50']")"); d_p99=$(us "$(op "['latency_ms']['p99']")")
  d_n=$(jsonq "$J" "sum(o['ok'] for s in r['stages'] for o in s['ops']) + r['failed']")
  header "round $n (load $(cut -d' ' -f1 /proc/loadavg))" "warp"
  row "throughput (obj/s)" "$w_rate" "$d_rate"
  row "latency p50 (µs)" "$w_p50" "$d_p50"
  row "latency p99 (µs)" "$w_p99" "$d_p99"
  [ "$OP" = get ] && row "time to first byte p50 (µs)" "$w_ttfb50" "$(us "$(op "['phases_ms']['first_byte']['p50']")")"
  [ "$OP" = get ] && row "  same, dbcanary service time p50 (µs)" "$w_p50" "$(us "$(op "['service_time_ms']['p50']")")"
  row "client CPU ms per 1000 requests" "$(cpu_per_kop $((c1 - c0)) "$w_n")" "$(cpu_per_kop $((c2 - c1)) "$d_n")"
  row "MinIO CPU ms per 1000 requests" "$(cpu_per_kop $((s1 - s0)) "$w_n")" "$(cpu_per_kop $((s2 - s1)) "$d_n")"
  row "MinIO CPU busy (% of one core)" "$(busy_pct $((s1 - s0)) "$t0" "$t1")" "$(busy_pct $((s2 - s1)) "$t1" "$t2")"
  what="written"; [ "$OP" = get ] && what="read back and compared byte for byte"
  echo "warp requests measured: $w_n; dbcanary: $(op "['ok']") ok ($what), $(jsonq "$J" "r['failed']") failed"
  ratios+=("$(ratio "$d_rate" "$w_rate") $(ratio "$d_p50" "$w_p50") $(ratio "$d_p99" "$w_p99")")
done
printf '%s\n' "${ratios[@]}" | medians warp "above 1: faster for throughput, slower for latency" throughput p50 p99
