#!/usr/bin/env bash
# MinIO warp 1.0.0 and `dbcanary bench --profile s3-sizes` side by side on
# the local MinIO, same shape, one run each, then both figures and the ratio
# (dbcanary / warp).
#
#   test/bench/peer-s3.sh get [SIZE] [CONCURRENCY]   GET, default 4KiB objects, 8 concurrent, 20 s
#   test/bench/peer-s3.sh put [SIZE] [CONCURRENCY]   PUT, same defaults
#   test/bench/peer-s3.sh floor                      GET 4KiB at 10 req/s, 1 concurrent, 30 s
#
# Env: SECS (run length), PEERS (tool cache), BENCH_OUT (where outputs go).
# warp reads its latency from each request's start; dbcanary GETs also
# compare every byte read with what was written (warp does not look).
source "$(dirname "$0")/peers-lib.sh"
OP=${1:-get}; SIZE=${2:-4KiB}; CONC=${3:-8}
install_warp
stack_env minio
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
warp_extra=(); dbc_extra=()
case $OP in
  get|put) SECS=${SECS:-20} ;;
  floor) SECS=${SECS:-30}; OP=get; SIZE=4KiB; CONC=1; warp_extra=(--rps-limit 10); dbc_extra=(--rate 10) ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
[ "$OP" = get ] && warp_extra+=(--objects $((CONC * 4)))
log "warp $OP --obj.size $SIZE --concurrent $CONC --duration ${SECS}s ${warp_extra[*]}"
timeout $((SECS + 120)) "$WARP" "$OP" --host "$DBCANARY_TEST_S3_ENDPOINT" --access-key "$AK" --secret-key "$SK" \
  --bucket warp-peers --obj.size "$SIZE" --concurrent "$CONC" --duration "${SECS}s" --no-color --analyze.v \
  --benchdata "$OUT/warp-$OP" "${warp_extra[@]}" 2>&1 | sed -u 's/\r/\n/g; s/\x1b\[[0-9;]*[A-Za-z]//g' > "$OUT/warp-$OP.txt" \
  || die "warp failed: $(tail -5 "$OUT/warp-$OP.txt")"
# µs percentiles of the measured op from warp's raw data (its report rounds to ms).
read -r w_n w_p50 w_p99 w_ttfb50 < <(zstd -dc "$OUT/warp-$OP.csv.zst" | python3 -c '
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
' "$OP")
w_rate=$(sed -n 's/.*Average: [0-9.]* [KMG]*i*B\/s, \([0-9.]*\) obj\/s.*/\1/p' "$OUT/warp-$OP.txt" | head -1)

log "dbcanary bench --profile s3-sizes --param sizes=$SIZE --param worker-steps=$CONC --mix $OP=1 --duration ${SECS}s ${dbc_extra[*]}"
"$DBC" bench --config.file "$cfg" --profile s3-sizes --param sizes="$SIZE" --param worker-steps="$CONC" --mix "$OP=1" --duration "${SECS}s" "${dbc_extra[@]}" \
  --json "$OUT/dbcanary-$OP.json" --html "$OUT/dbcanary-$OP.html" > "$OUT/dbcanary-$OP.txt" 2> "$OUT/dbcanary-$OP.err" \
  || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-$OP.err")"
J=$OUT/dbcanary-$OP.json
op() { jsonq "$J" "[o for s in r['stages'] if not s.get('setup') for o in s['ops']][0]$1"; }
us() { awk -v v="$1" 'BEGIN { printf "%.0f", v * 1000 }'; }

echo
echo "S3 side by side: $OP $SIZE objects, $CONC concurrent, ${SECS}s ${warp_extra[*]}; outputs in $OUT"
header "figure" "warp"
row "throughput (obj/s)" "$w_rate" "$(op "['throughput_ops_per_s']")"
row "latency p50 (µs)" "$w_p50" "$(us "$(op "['latency_ms']['p50']")")"
row "latency p99 (µs)" "$w_p99" "$(us "$(op "['latency_ms']['p99']")")"
[ "$OP" = get ] && row "time to first byte p50 (µs)" "$w_ttfb50" "$(us "$(op "['phases_ms']['first_byte']['p50']")")"
[ "$OP" = get ] && row "  same, dbcanary service time p50 (µs)" "$w_p50" "$(us "$(op "['service_time_ms']['p50']")")"
what="written"; [ "$OP" = get ] && what="read back and compared byte for byte"
echo "warp requests measured: $w_n; dbcanary: $(op "['ok']") ok ($what), $(jsonq "$J" "r['failed']") failed"
