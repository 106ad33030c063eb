#!/usr/bin/env bash
# Measures the daemon's resident memory and CPU while it probes one local
# RabbitMQ target at 1 publish/s (+ its consume), the foundation's footprint aim
# (under 40 MB RSS, under 1 % of a core).
# Usage: test/bench/footprint.sh [seconds]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-60}
make -s build
test/stack/rabbitmq.sh start
source <(test/stack/demo-env.sh)
cfg=$(mktemp --suffix .yaml)
cat > "$cfg" <<CONF
global: {instance_id: footprint}
targets:
  - name: rabbitmq-footprint
    backend: rabbitmq
    ops: {publish: {rate: 1}, consume: {}}
    rabbitmq:
      url: amqp://127.0.0.1:5672/
      username: dbcanary
      password_env: DBCANARY_RABBITMQ_PASSWORD
CONF
port=19191
bin/dbcanary run --config.file "$cfg" --web.listen-address 127.0.0.1:$port --log.level warn &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$cfg"' EXIT
sleep 5 # warm-up: connection, first ops
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu); t0=$(date +%s.%N)
maxrss=0
for _ in $(seq "$SECS"); do
  rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  [ "$rss" -gt "$maxrss" ] && maxrss=$rss
  sleep 1
done
c1=$(cpu); t1=$(date +%s.%N)
ops=$(curl -s 127.0.0.1:$port/metrics | awk '/^dbcanary_op_latency_seconds_count\{.*result="ok"/{s+=$2} END{print s}')
awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v hz="$ticks" -v rss="$maxrss" -v ops="$ops" -v secs="$SECS" 'BEGIN{
  cpu = (c1-c0)/hz/(t1-t0)*100
  printf "dbcanary footprint over %d s, 1 RabbitMQ target at 1 publish/s + consume:\n", secs
  printf "  max RSS      %.1f MB   (aim < 40 MB)\n", rss/1024
  printf "  CPU          %.3f %% of one core   (aim < 1 %%)\n", cpu
  printf "  ok samples   %d\n", ops
}'
