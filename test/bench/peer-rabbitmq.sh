#!/usr/bin/env bash
# RabbitMQ PerfTest 2.22.1 and `dbcanary bench --profile rabbitmq-perftest`
# side by side on the local broker, same shape, alternating ROUNDS times
# (default 3); each round prints both figures and the ratio (dbcanary /
# PerfTest), the CPU each tool and the broker spent per 1000 messages
# (PerfTest's includes its JVM's start), and the last lines the median ratios.
#
#   test/bench/peer-rabbitmq.sh [throughput]   2 publishers, confirm each message (-c 1), persistent
#                                              1 KiB messages, one durable named queue, 1 consumer, 20 s
#   test/bench/peer-rabbitmq.sh floor          the canary rate: 1 publisher at 10 msg/s, same messages, 30 s
#
# Env: SECS (run length), ROUNDS (default 3), PIN (1: the broker on CPU 0, the
# tools on CPU 1, as on two machines), PEERS (tool cache), BENCH_OUT (where outputs go).
# PerfTest's consumer latency is from the timestamp it puts in the body to
# receipt; its confirm latency from the send to the confirm. dbcanary's
# latencies count from each op's start (its slot at a fixed rate).
source "$(dirname "$0")/peers-lib.sh"
MODE=${1:-throughput}
install_perftest
stack_env rabbitmq
pin_server rabbitmq
ROUNDS=${ROUNDS:-3}
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
us() { awk -v v="$1" 'BEGIN { printf "%.0f", v * 1000 }'; }

# perftest_round N: one PerfTest run into $OUT/perftest-$MODE-N.txt.
perftest_round() {
  local q=perftest-peers-$$-$1 f=$OUT/perftest-$MODE-$1.txt
  log "round $1: PerfTest ${pt_shape[*]} --flag persistent --size 1024 --queue $q (durable, not auto-delete) --time $SECS"
  "${CLIENT[@]}" timeout $((SECS + 60)) java -cp "$(cat "$CP_FILE")" com.rabbitmq.perf.PerfTest --uri "$URI" "${pt_shape[@]}" \
    --flag persistent --size 1024 --queue "$q" --auto-delete false --queue-args x-expires=60000 \
    --time "$SECS" --id peers > "$f" 2>&1 || die "PerfTest failed: $(tail -5 "$f")"
}

# dbcanary_round N: one dbcanary run into $OUT/dbcanary-$MODE-N.json.
dbcanary_round() {
  log "round $1: dbcanary bench --profile rabbitmq-perftest ${dbc_shape[*]} --duration ${SECS}s"
  "${CLIENT[@]}" "$DBC" bench --config.file "$cfg" --profile rabbitmq-perftest "${dbc_shape[@]}" --duration "${SECS}s" --warmup 0s \
    --json "$OUT/dbcanary-$MODE-$1.json" --html "$OUT/dbcanary-$MODE-$1.html" > "$OUT/dbcanary-$MODE-$1.txt" 2> "$OUT/dbcanary-$MODE-$1.err" \
    || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-$MODE-$1.err")"
}

echo
echo "RabbitMQ side by side ($MODE): PerfTest ${pt_shape[*]} -f persistent -s 1024, ${SECS}s, $ROUNDS rounds alternating, PIN=${PIN:-0}; outputs in $OUT"
ratios=()
for n in $(seq 1 "$ROUNDS"); do
  c0=$(children_ticks); t0=$(uptime_s); s0=$(server_ticks rabbitmq)
  perftest_round "$n"
  c1=$(children_ticks); t1=$(uptime_s); s1=$(server_ticks rabbitmq)
  dbcanary_round "$n"
  c2=$(children_ticks); t2=$(uptime_s); s2=$(server_ticks rabbitmq)
  F=$OUT/perftest-$MODE-$n.txt J=$OUT/dbcanary-$MODE-$n.json
  pt() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" "$F" | tail -1; }
  pt5() { sed -n "s/.*$1 min\/median\/75th\/95th\/99th \([0-9/]*\) µs.*/\1/p" "$F" | tail -1 | cut -d/ -f"$2"; }
  op() { jsonq "$J" "[o for o in r['stages'][0]['ops'] if o['op']=='$1'][0]$2"; }
  pt_send=$(pt "sending rate avg:"); pt_recv=$(pt "receiving rate avg:")
  pt_conf50=$(pt5 "confirm latency" 2); pt_cons50=$(pt5 "consumer latency" 2)
  pt_conf99=$(pt5 "confirm latency" 5); pt_cons99=$(pt5 "consumer latency" 5)
  d_send=$(op publish "['throughput_ops_per_s']"); d_recv=$(op consume "['throughput_ops_per_s']")
  d_conf50=$(us "$(op publish "['latency_ms']['p50']")"); d_conf99=$(us "$(op publish "['latency_ms']['p99']")")
  d_cons50=$(us "$(op consume "['latency_ms']['p50']")"); d_cons99=$(us "$(op consume "['latency_ms']['p99']")")
  pt_msgs=$(awk -v a="$pt_send" -v b="$pt_recv" -v t="$SECS" 'BEGIN { printf "%d", (a + b) * t }')
  d_msgs=$(jsonq "$J" "sum(o['ok'] for s in r['stages'] for o in s['ops']) + r['failed']")
  header "round $n (load $(cut -d' ' -f1 /proc/loadavg))" "PerfTest"
  row "publish rate (msg/s)" "$pt_send" "$d_send"
  row "receive rate (msg/s)" "$pt_recv" "$d_recv"
  row "confirm latency p50 (µs) [publish latency]" "$pt_conf50" "$d_conf50"
  row "  same, dbcanary service time p50 (µs)" "$pt_conf50" "$(us "$(op publish "['service_time_ms']['p50']")")"
  row "confirm latency p99 (µs)" "$pt_conf99" "$d_conf99"
  row "consumer latency p50 (µs) [consume e2e]" "$pt_cons50" "$d_cons50"
  row "  same, dbcanary from the send (µs)" "$pt_cons50" "$(us "$(op consume "['service_time_ms']['p50']")")"
  row "consumer latency p99 (µs)" "$pt_cons99" "$d_cons99"
  row "client CPU ms per 1000 messages sent+received" "$(cpu_per_kop $((c1 - c0)) "$pt_msgs")" "$(cpu_per_kop $((c2 - c1)) "$d_msgs")"
  row "broker CPU ms per 1000 messages" "$(cpu_per_kop $((s1 - s0)) "$pt_msgs")" "$(cpu_per_kop $((s2 - s1)) "$d_msgs")"
  row "broker CPU busy (% of one core)" "$(busy_pct $((s1 - s0)) "$t0" "$t1")" "$(busy_pct $((s2 - s1)) "$t1" "$t2")"
  echo "verified by dbcanary: $(op consume "['ok']") messages consumed and compared, $(jsonq "$J" "r['failed']") failed"
  ratios+=("$(ratio "$d_send" "$pt_send") $(ratio "$d_conf50" "$pt_conf50") $(ratio "$d_conf99" "$pt_conf99") $(ratio "$d_cons99" "$pt_cons99")")
done
printf '%s\n' "${ratios[@]}" | medians PerfTest "above 1: faster for a rate, slower for a latency" "publish rate" "confirm p50" "confirm p99" "consumer p99"
