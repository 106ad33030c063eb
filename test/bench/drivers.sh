#!/usr/bin/env bash
# Distributed-mode scalability with the dummy driver, as Mongoose measures it
# (mongoose-v3.5-performance.txt, 1.2.3): the summary rate of 1, 2, ... MAX
# `dbcanary bench` drivers of the noop probe (no I/O: the engine alone), closed
# loop, started together (--shard i/N --start-at) and merged (`bench merge`).
# All drivers run on this machine, so past its cores they share them.
#
# Usage: test/bench/drivers.sh [MAX]      (default 4)
#   DRIVERS_SECONDS  measured seconds per run (default 10; Mongoose ran 5 minutes)
#   DRIVERS_WORKERS  workers per driver (default 1: one load thread per driver)
#   DRIVERS_RUNS     repetitions; each pass runs 1..MAX, the next MAX..1 (default 3)
#   DRIVERS_OUT      directory of the reports (default: a new temporary one)
# Prints one line per run and a table: the median summary rate per driver count,
# the speed-up over one driver, the scaling efficiency (speed-up / drivers), and the
# CPU the drivers got (user + system seconds of the whole processes, /usr/bin/time:
# start-up, the 1 s warm-up and the measured seconds) with the measured ops per
# CPU-second: on a shared machine the drivers' share of the cores moves the rate.
set -euo pipefail
max=${1:-4}
secs=${DRIVERS_SECONDS:-10}
workers=${DRIVERS_WORKERS:-1}
runs=${DRIVERS_RUNS:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${DRIVERS_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/dbcanary-drivers.XXXXXX")}
mkdir -p "$out"
bin=$out/dbcanary
(cd "$root" && CGO_ENABLED=0 go build -o "$bin" ./cmd/dbcanary)
printf 'global: {instance_id: drivers}\ntargets: []\n' >"$out/dbcanary.yaml"

echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; $max drivers max, ${secs}s, $workers worker(s) per driver, $runs runs; reports in $out"
printf '%-4s %-7s %14s %8s %16s  %s\n' run drivers "ops/s" "CPU s" "ops/CPU-second" "load average (1, 5, 15 min) before the run"
: >"$out/rates.txt"
for run in $(seq 1 "$runs"); do
  order=$(seq 1 "$max")
  [ $((run % 2)) -eq 0 ] && order=$(seq "$max" -1 1)
  for n in $order; do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    start=$(date -u -d '+3 sec' +%FT%T.%3NZ)
    pids=()
    for i in $(seq 0 $((n - 1))); do
      /usr/bin/time -f '%U %S' -o "$out/r$run-n$n-d$i.cpu" \
        "$bin" --config.file "$out/dbcanary.yaml" bench --profile floor --rate 0 --workers "$workers" \
        --duration "${secs}s" --warmup 1s --shard "$i/$n" --start-at "$start" \
        --json "$out/r$run-n$n-d$i.json" >/dev/null 2>"$out/r$run-n$n-d$i.log" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    files=()
    for i in $(seq 0 $((n - 1))); do files+=("$out/r$run-n$n-d$i.json"); done
    "$bin" bench merge --json "$out/r$run-n$n-merged.json" "${files[@]}" >"$out/r$run-n$n-merged.txt" 2>/dev/null
    rate=$(jq '.stages[0].throughput_ops_per_s' "$out/r$run-n$n-merged.json")
    ops=$(jq '.stages[0].ops[0].count' "$out/r$run-n$n-merged.json")
    cpu=$(cat "$out"/r$run-n$n-d*.cpu | awk '{ s += $1 + $2 } END { printf "%.2f", s }')
    printf '%-4s %-7s %14.0f %8s %16.0f  %s\n' "$run" "$n" "$rate" "$cpu" "$(echo "$ops $cpu" | awk '{ print $1 / $2 }')" "$load"
    echo "$n $rate $cpu $ops" >>"$out/rates.txt"
  done
done

echo
echo "| drivers | summary rate (median, ops/s) | runs (ops/s) | speed-up over 1 | efficiency (speed-up / drivers) | CPU-seconds per run (mean) | measured ops per CPU-second (mean) |"
echo "|---|---|---|---|---|---|---|"
sort -n -k1,1 -k2,2g "$out/rates.txt" | awk -v max="$max" '
  { v[$1] = v[$1] (v[$1] == "" ? "" : ", ") sprintf("%.0f", $2); r[$1, ++c[$1]] = $2; cpu[$1] += $3; ops[$1] += $4 }
  END {
    for (n = 1; n <= max; n++) {
      k = c[n]; med = (k % 2) ? r[n, (k + 1) / 2] : (r[n, k / 2] + r[n, k / 2 + 1]) / 2
      if (n == 1) one = med
      printf "| %d | %.0f | %s | %.2fx | %.0f %% | %.1f | %.0f |\n", n, med, v[n], med / one, 100 * med / one / n, cpu[n] / k, ops[n] / cpu[n]
    }
  }'
