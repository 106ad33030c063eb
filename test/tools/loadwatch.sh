#!/usr/bin/env bash
# loadwatch: what loads the machine while a long suite runs (make test's integration
# target starts it; any engineer can run it beside anything). Every INTERVAL seconds it
# appends one line to LOG: the 1-minute load average, the kernel's CPU and IO pressure
# (PSI "some", % of the last 10 s), the cores busy, and the processes that used the CPU,
# in cores, grouped by what they are (cassandra, opensearch, rabbitmq, minio, a test
# binary, ...; a server of another stack directory carries its suffix: cassandra@pages).
# CPU of processes born and gone within one interval (compilers, short commands) is
# counted as short-lived: the busy total minus what the live processes account for.
# `summary` prints the means, the largest consumers over the whole log and the 5 most
# loaded intervals with their consumers.
# The watcher stops by itself after LOADWATCH_MAX_SECONDS (4 hours).
# Usage: loadwatch.sh install (nothing to install) | start LOG [INTERVAL=15] | stop LOG | summary LOG
set -uo pipefail

# label PID COMM: what the process is.
label() {
  local pid=$1 comm=$2 cmd="" sfx=""
  case $comm in
    java | beam.smp | erl_child_setup | minio* | prometheus* | alertmanager* | memcached | swift* | python*)
      cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || true
      [[ $cmd =~ dbcanary-stack(-[a-z0-9]+) ]] && sfx="@${BASH_REMATCH[1]#-}"
      [[ $cmd =~ dbcanary-(chaos|pages)/ ]] && sfx="@${BASH_REMATCH[1]}"
      ;;
  esac
  case $comm in
    java)
      case $cmd in
        *CassandraDaemon*) comm=cassandra ;;
        *opensearch*) comm=opensearch ;;
      esac
      ;;
    beam.smp | erl_child_setup) comm=rabbitmq ;;
    minio*) comm=minio ;;
    swift* | python*) [[ $cmd == *swift* ]] && comm=swift ;;
  esac
  printf '%s%s' "$comm" "$sfx"
}

watch() {
  local log=$1 every=$2 prev_busy prev_total first=1 end=$((SECONDS + ${LOADWATCH_MAX_SECONDS:-14400}))
  declare -A prev=()
  read -r _ u n s i w q sq st _ </proc/stat
  prev_busy=$((u + n + s + q + sq + st)) prev_total=$((u + n + s + i + w + q + sq + st))
  while [ $SECONDS -lt $end ]; do # bounded: a watcher whose stop never came ends by itself (4 h)
    local now l1 psi_cpu=- psi_io=- busy total dbusy dtotal seen=0 line f rest comm pid t d lab
    declare -A by=() cur=()
    for f in /proc/[0-9]*/stat; do
      read -r line <"$f" 2>/dev/null || continue
      pid=${f#/proc/} pid=${pid%/stat}
      comm=${line#*\(} comm=${comm%\)*} rest=${line##*\) }
      # shellcheck disable=SC2086
      set -- $rest # $1 is field 3 (state): utime is field 14, stime 15
      t=$((${12} + ${13}))
      cur[$pid]=$t
      [ -n "${prev[$pid]:-}" ] || { [ $first = 1 ] && continue; prev[$pid]=0; }
      d=$((t - ${prev[$pid]}))
      [ $d -gt 0 ] || continue
      seen=$((seen + d))
      lab=$(label "$pid" "$comm")
      by[$lab]=$((${by[$lab]:-0} + d))
    done
    read -r _ u n s i w q sq st _ </proc/stat
    busy=$((u + n + s + q + sq + st)) total=$((u + n + s + i + w + q + sq + st))
    dbusy=$((busy - prev_busy)) dtotal=$((total - prev_total))
    prev_busy=$busy prev_total=$total
    prev=()
    for pid in "${!cur[@]}"; do prev[$pid]=${cur[$pid]}; done
    if [ $first = 0 ] && [ $dtotal -gt 0 ]; then
      read -r l1 _ </proc/loadavg
      [ -r /proc/pressure/cpu ] && psi_cpu=$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu)
      [ -r /proc/pressure/io ] && psi_io=$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/io)
      [ $((dbusy - seen)) -gt 0 ] && by[short-lived]=$((dbusy - seen))
      now=$(date -u +%H:%M:%S)
      {
        printf '%s load1=%s cpu_pressure=%s io_pressure=%s busy=%s top:' "$now" "$l1" "$psi_cpu" "$psi_io" \
          "$(awk -v b="$dbusy" -v t="$dtotal" -v n="$(nproc)" 'BEGIN { printf "%.2f", b / t * n }')"
        for lab in "${!by[@]}"; do printf '%s %s\n' "${by[$lab]}" "$lab"; done | sort -rn | head -8 |
          awk -v secs="$dtotal" -v n="$(nproc)" '{ printf " %s=%.2f", $2, $1 / (secs / n) }'
        printf '\n'
      } >>"$log"
    fi
    first=0
    unset by cur
    sleep "$every"
  done
}

summary() {
  local log=$1
  [ -s "$log" ] || { echo "loadwatch: no samples in $log"; return 0; }
  awk '
    { n++; for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "top:") { top = i; break } v[kv[1]] = kv[2] }
      load += v["load1"]; if (v["load1"] > maxload) maxload = v["load1"]; busy += v["busy"]
      if (v["cpu_pressure"] != "-") { cpu += v["cpu_pressure"]; ncpu++ } if (v["io_pressure"] != "-") { io += v["io_pressure"]; nio++ }
      for (i = top + 1; i <= NF; i++) { split($i, kv, "="); cores[kv[1]] += kv[2] }
      line[n] = $0; l[n] = v["load1"] }
    END {
      printf "%d samples: 1-minute load mean %.1f, max %.1f; cores busy mean %.2f", n, load / n, maxload, busy / n
      if (ncpu) printf "; CPU pressure mean %.0f %%", cpu / ncpu
      if (nio) printf ", IO pressure mean %.0f %%", io / nio
      printf "\nmean cores by consumer over the log: "
      for (k in cores) printf "%s=%.2f\n", k, cores[k] / n | "sort -t= -k2 -rn | head -10 | tr \"\\n\" \" \""
      close("sort -t= -k2 -rn | head -10 | tr \"\\n\" \" \"")
      printf "\nthe 5 most loaded samples:\n"
      for (i = 1; i <= n; i++) printf "%s\t%s\n", l[i], line[i] | "sort -rn | head -5 | cut -f2-"
    }' "$log"
}

case ${1:-} in
  install | path) ;; # nothing to build: the Makefile's tool loop calls every script with install
  start)
    log=${2:?usage: loadwatch.sh start LOG [INTERVAL]}
    mkdir -p "$(dirname "$log")" && : >"$log"
    # Detached from every descriptor of the caller (make's output pipe among them): a
    # watcher must never hold a pipe its caller waits on.
    (
      for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
      done
      watch "$log" "${3:-15}"
    ) </dev/null >/dev/null 2>&1 &
    echo $! >"$log.pid"
    ;;
  stop)
    log=${2:?usage: loadwatch.sh stop LOG}
    [ -f "$log.pid" ] && kill "$(cat "$log.pid")" 2>/dev/null
    rm -f "$log.pid"
    summary "$log"
    ;;
  summary) summary "${2:?usage: loadwatch.sh summary LOG}" ;;
  *)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
