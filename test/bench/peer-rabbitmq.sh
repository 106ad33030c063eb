#!/usr/bin/env bash
# RabbitMQ PerfTest 2.22.1 and `dbcanary bench --profile rabbitmq-perftest`
# side by side on the local broker, same shape, one run each, then both
# figures and the ratio (dbcanary / PerfTest).
#
#   test/bench/peer-rabbitmq.sh [throughput]   2 publishers, confirm each message (-c 1), persistent
#                                              1 KiB messages, one durable named queue, 1 consumer, 20 s
#   test/bench/peer-rabbitmq.sh floor          the canary rate: 1 publisher at 10 msg/s, same messages, 30 s
#
# Env: SECS (run length), PEERS (tool cache), BENCH_OUT (where outputs go).
# PerfTest's consumer latency is from the timestamp it puts in the body to
# receipt; its confirm latency from the send to the confirm. dbcanary's
# latencies count from each op's start (its slot at a fixed rate).
source "$(dirname "$0")/peers-lib.sh"
MODE=${1:-throughput}
install_perftest
stack_env rabbitmq
PW=$(cat "$DBCANARY_TEST_RABBITMQ_PASSWORD_FILE")
URI="amqp://$DBCANARY_TEST_RABBITMQ_USER:$PW@127.0.0.1:$DBCANARY_TEST_RABBITMQ_PORT"
DBC=$(dbcanary_bin)
cfg=$OUT/rabbitmq.yaml
cat > "$cfg" <<CONF
global: {instance_id: peers}
targets:
  - name: mq
    backend: rabbitmq
    rabbitmq: {url: "$DBCANARY_TEST_RABBITMQ_URL", username: "$DBCANARY_TEST_RABBITMQ_USER", password_file: "$DBCANARY_TEST_RABBITMQ_PASSWORD_FILE", message_size: 1024}
CONF
case $MODE in
  throughput) SECS=${SECS:-20}; pt_shape=(--producers 2 --consumers 1 --confirm 1); dbc_shape=(--workers 2) ;;
  floor)      SECS=${SECS:-30}; pt_shape=(--producers 1 --consumers 1 --confirm 1 --rate 10); dbc_shape=(--workers 1 --rate 10) ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
queue=perftest-peers-$$
log "PerfTest ${pt_shape[*]} --flag persistent --size 1024 --queue $queue (durable, not auto-delete) --time $SECS"
timeout $((SECS + 60)) java -cp "$(cat "$CP_FILE")" com.rabbitmq.perf.PerfTest --uri "$URI" "${pt_shape[@]}" \
  --flag persistent --size 1024 --queue "$queue" --auto-delete false --queue-args x-expires=60000 \
  --time "$SECS" --id peers > "$OUT/perftest-$MODE.txt" 2>&1 || die "PerfTest failed: $(tail -5 "$OUT/perftest-$MODE.txt")"
pt() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" "$OUT/perftest-$MODE.txt" | tail -1; }
pt5() { sed -n "s/.*$1 min\/median\/75th\/95th\/99th \([0-9/]*\) µs.*/\1/p" "$OUT/perftest-$MODE.txt" | tail -1 | cut -d/ -f"$2"; }
pt_send=$(pt "sending rate avg:"); pt_recv=$(pt "receiving rate avg:")
pt_conf50=$(pt5 "confirm latency" 2); pt_cons50=$(pt5 "consumer latency" 2)
pt_conf99=$(pt5 "confirm latency" 5); pt_cons99=$(pt5 "consumer latency" 5)

log "dbcanary bench --profile rabbitmq-perftest ${dbc_shape[*]} --duration ${SECS}s"
"$DBC" bench --config.file "$cfg" --profile rabbitmq-perftest "${dbc_shape[@]}" --duration "${SECS}s" --warmup 0s \
  --json "$OUT/dbcanary-$MODE.json" --html "$OUT/dbcanary-$MODE.html" > "$OUT/dbcanary-$MODE.txt" 2> "$OUT/dbcanary-$MODE.err" \
  || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-$MODE.err")"
J=$OUT/dbcanary-$MODE.json
op() { jsonq "$J" "[o for o in r['stages'][0]['ops'] if o['op']=='$1'][0]$2"; }
us() { awk -v v="$1" 'BEGIN { printf "%.0f", v * 1000 }'; }

echo
echo "RabbitMQ side by side ($MODE): PerfTest ${pt_shape[*]} -f persistent -s 1024, ${SECS}s; outputs in $OUT"
header "figure" "PerfTest"
row "publish rate (msg/s)" "$pt_send" "$(op publish "['throughput_ops_per_s']")"
row "receive rate (msg/s)" "$pt_recv" "$(op consume "['throughput_ops_per_s']")"
row "confirm latency p50 (µs) [publish latency]" "$pt_conf50" "$(us "$(op publish "['latency_ms']['p50']")")"
row "  same, dbcanary service time p50 (µs)" "$pt_conf50" "$(us "$(op publish "['service_time_ms']['p50']")")"
row "confirm latency p99 (µs)" "$pt_conf99" "$(us "$(op publish "['latency_ms']['p99']")")"
row "consumer latency p50 (µs) [consume e2e]" "$pt_cons50" "$(us "$(op consume "['latency_ms']['p50']")")"
row "  same, dbcanary from the send (µs)" "$pt_cons50" "$(us "$(op consume "['service_time_ms']['p50']")")"
row "consumer latency p99 (µs)" "$pt_cons99" "$(us "$(op consume "['latency_ms']['p99']")")"
echo "verified by dbcanary: $(op consume "['ok']") messages consumed and compared, $(jsonq "$J" "r['failed']") failed"
