#!/usr/bin/env bash
# opensearch-benchmark 2.4.0 (offline, a workload written here) and
# `dbcanary bench --profile opensearch-pmc` side by side on the local
# OpenSearch, same shape, the two tools alternating ROUNDS times (default 3);
# each round prints both figures, the ratio (dbcanary / OSB) and the CPU each
# tool and OpenSearch spent, the last lines the median ratios. PIN=1 runs
# OpenSearch on CPU 0 and the tools on CPU 1.
#
#   test/bench/peer-opensearch.sh     bulk index-append (500 docs per request, 8 clients), a term query
#                                     unthrottled (8 clients), then at 20 ops/s
#
# Env: SECS (search task length, default 15), DOCS (corpus size, default 100000: 20000 bulk in 4 s, too short to compare), ROUNDS (default 3),
# PIN (1: server and tools on separate CPUs), PEERS, BENCH_OUT.
# The corpus is dbcanary's own document shape (id, instance, kind, topic, seq,
# date, a 6-10 word title, a 30-49 word abstract, a 200-word body with a planted
# phrase, the probe's vocabulary read from probes/opensearch/document.go, the
# probe's mapping), and dbcanary's bulk stage indexes the same number of
# documents ($DOCS, no warm-up) as OSB's index-append, with the same action
# line (`create` with the document's id: the corpus carries it, OSB's
# includes-action-and-meta-data, so neither tool lets OpenSearch pick the id);
# the term query filters a keyword field and returns one or two documents,
# as the probe's search_term does (which also checks the hits are exactly right).
# index-append is compared over each tool's wall clock, first request to last
# answer (OSB's own "Mean Throughput" is printed too; see osb_wall).
source "$(dirname "$0")/peers-lib.sh"
SECS=${SECS:-15}; DOCS=${DOCS:-100000}; ROUNDS=${ROUNDS:-3}
install_osb
stack_env opensearch
pin_server opensearch
DBC=$(dbcanary_bin)
WL=$PEERS/osb-workload/side-by-side-v3-$DOCS-$SECS
if [ ! -s "$WL/workload.json" ]; then
  mkdir -p "$WL"
  ROOT=$ROOT python3 - "$WL" "$DOCS" "$SECS" <<'PY'
import json, os, random, re, sys
wl, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
# The same document as the probe's index and bulk ops write (probes/opensearch/document.go):
# its vocabulary, topics and planted phrases read from the source, the same fields and lengths.
src = open(os.path.join(os.environ["ROOT"], "probes/opensearch/document.go")).read()
words = re.search(r"fillerWords = strings.Fields\(`([^`]*)`\)", src).group(1).split()
topics = re.findall(r'"(\w+)"', re.search(r"topics = \[\]string\{([^}]*)\}", src).group(1))
phrases = re.findall(r'"([^"]+)"', re.search(r"phrases = \[\]string\{([^}]*)\}", src).group(1))
def wordlist(k): return " ".join(rng.choice(words) for _ in range(k))
def cap(t): return t[:1].upper() + t[1:]
def sentences(k):
    out = []
    while k > 0:
        m = min(k, 8 + rng.randrange(13)); out.append(cap(wordlist(m)) + "."); k -= m
    return " ".join(out)
with open(os.path.join(wl, "documents.json"), "w") as f:
    for i in range(n):
        kind = "ref" if i < 12 else "op"
        body = sentences(200).split(" "); at = rng.randrange(200)
        body[at:at] = rng.choice(phrases).split(" ")
        # The action line dbcanary's bulk sends too: create, with the document's own id
        # (OpenSearch then checks the id is new, work an auto id skips).
        f.write(json.dumps({"create": {"_index": "osb-side-by-side", "_id": "osb-run-%d" % i}}) + "\n")
        f.write(json.dumps({"id": "osb-run-%d" % i, "instance": "osb", "kind": kind, "topic": topics[i % len(topics)],
                            "seq": i, "date": "2026-11-24T00:00:00.000Z", "title": cap(wordlist(6 + rng.randrange(5))),
                            "abstract": sentences(30 + rng.randrange(20)), "body": " ".join(body)}) + "\n")
json.dump({"settings": {"index.number_of_shards": 1, "index.number_of_replicas": 0, "index.refresh_interval": "1s"},
           "mappings": {"dynamic": "strict", "properties": {"id": {"type": "keyword"}, "instance": {"type": "keyword"}, "kind": {"type": "keyword"},
               "topic": {"type": "keyword"}, "seq": {"type": "long"}, "date": {"type": "date", "format": "strict_date_optional_time"},
               "title": {"type": "text"}, "abstract": {"type": "text"}, "body": {"type": "text"}}}},
          open(os.path.join(wl, "index.json"), "w"), indent=2)
q = {"query": {"bool": {"filter": [{"term": {"instance": "osb"}}, {"term": {"kind": "ref"}}, {"term": {"topic": "oncology"}}]}},
     "size": 17, "track_total_hits": True}
json.dump({"version": 2, "description": "dbcanary side-by-side: bulk, then a term query unthrottled and at 20 ops/s",
  "indices": [{"name": "osb-side-by-side", "body": "index.json"}],
  "corpora": [{"name": "osb-side-by-side", "documents": [{"source-file": "documents.json", "document-count": n,
               "includes-action-and-meta-data": True, "uncompressed-bytes": os.path.getsize(os.path.join(wl, "documents.json"))}]}],
  "schedule": [
    {"operation": {"operation-type": "delete-index"}},
    {"operation": {"operation-type": "create-index"}},
    {"operation": {"name": "index-append", "operation-type": "bulk", "bulk-size": 500}, "clients": 8},
    {"operation": {"operation-type": "refresh"}},
    {"operation": {"name": "term", "operation-type": "search", "index": "osb-side-by-side", "body": q},
     "clients": 8, "warmup-time-period": 3, "time-period": secs},
    {"operation": {"name": "term-20rps", "operation-type": "search", "index": "osb-side-by-side", "body": q},
     "clients": 8, "warmup-time-period": 2, "time-period": secs, "target-throughput": 20},
    {"operation": {"name": "cleanup", "operation-type": "delete-index"}}]},
  open(os.path.join(wl, "workload.json"), "w"), indent=2)
PY
fi
OSBHOME=$PEERS/osb-home; mkdir -p "$OSBHOME"
osb() { awk -F'|' -v m="$2" -v t="$3" '{ gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4) } $2 == m && $3 == t { print $4 }' "$1"; }
ms2us() { awk -v v="$1" 'BEGIN { printf "%.0f", v * 1000 }'; }

# osb_round N: opensearch-benchmark's whole schedule; its results in $OUT/osb-result-N.md,
# the lines it logged meanwhile in $OUT/osb-log-N.txt
OSBLOG=$OSBHOME/.benchmark/logs/benchmark.log
osb_round() {
  local from=1; [ -f "$OSBLOG" ] && from=$(($(wc -l < "$OSBLOG") + 1))
  log "round $1: opensearch-benchmark run --offline --workload-path $WL ($DOCS docs)"
  group_run "$OUT/osb-cpu-$1" env HOME="$OSBHOME" BENCHMARK_HOME="$OSBHOME" timeout $((SECS * 3 + 240)) "${CLIENT[@]}" "$OSB_VENV/bin/opensearch-benchmark" run \
    --pipeline=benchmark-only --target-hosts="127.0.0.1:$DBCANARY_TEST_OPENSEARCH_PORT" --offline \
    --workload-path="$WL" --results-file="$OUT/osb-result-$1.md" > "$OUT/osb-$1.txt" 2>&1 || die "opensearch-benchmark failed: $(tail -5 "$OUT/osb-$1.txt")"
  tail -n +"$from" "$OSBLOG" > "$OUT/osb-log-$1.txt"
}

# osb_wall N: OSB's index-append in docs/s over its wall clock: $DOCS over the
# longest "Total run duration" its worker processes logged for the task (each
# times its clients from the first request to the last answer). Its "Mean
# Throughput" is the mean of cumulative rates sampled each second, right
# after an answer: with 40 bulks of 500 over 4 s it read 1.18x the rate a
# proxy between OSB and the server measured, first request to last answer
# (7 Dec 2026); dbcanary's figure is the run's ops over the same span.
osb_wall() {
  python3 - "$OUT/osb-log-$1.txt" "$DOCS" <<'PY'
import re, sys
from datetime import datetime, timedelta
# OSB logs milliseconds unpadded: "13:07:14,88" is 88 ms.
stamp = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{1,3}) ")
ts = lambda l: datetime.strptime(l[:19], "%Y-%m-%d %H:%M:%S") + timedelta(milliseconds=int(stamp.match(l).group(2)))
lines = [l for l in open(sys.argv[1], errors="replace") if stamp.match(l)]
start = [ts(l) for l in lines if "Choosing [unthrottled] for [index-append]" in l]
nxt = [ts(l) for l in lines if "Choosing [unthrottled] for [refresh]" in l]
if not start or not nxt:
    print("-"); sys.exit()
d = [float(m.group(1)) for l in lines if start[0] <= ts(l) < nxt[0] for m in [re.search(r"Total run duration: ([0-9.]+) seconds", l)] if m]
print("%.1f" % (int(sys.argv[2]) / max(d)) if d else "-")
PY
}

cfg=$OUT/opensearch.yaml
cat > "$cfg" <<CONF
global: {instance_id: peers}
targets:
  - name: os
    backend: opensearch
    opensearch: {addresses: ["$DBCANARY_TEST_OPENSEARCH_URL"], replicas: 0}
CONF
BULKS=$((DOCS / 500))
# dbcanary_round N: the same three tasks; reports in $OUT/dbcanary-{bulk,closed,20rps}-N.json;
# sets bulk_cpu and bulk_server, the CPU ticks of dbcanary's bulk run and of OpenSearch beside it
dbcanary_round() {
  local c0 s0; c0=$(children_ticks); s0=$(server_ticks opensearch)
  log "round $1: dbcanary bench --profile opensearch-pmc --param bulk-size=500 --workers 8 --rate 0 --ops $BULKS --warmup 0s (index-append: the same $DOCS documents as OSB)"
  "${CLIENT[@]}" "$DBC" bench --config.file "$cfg" --profile opensearch-pmc --param bulk-size=500 --workers 8 --rate 0 --ops "$BULKS" --duration 600s --warmup 0s \
    --json "$OUT/dbcanary-bulk-$1.json" > "$OUT/dbcanary-bulk-$1.txt" 2> "$OUT/dbcanary-bulk-$1.err" \
    || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-bulk-$1.err")"
  bulk_cpu=$(($(children_ticks) - c0)) bulk_server=$(($(server_ticks opensearch) - s0))
  log "round $1: dbcanary bench --profile opensearch-pmc --param bulk-size=500 --workers 8 --rate 0 (closed loop) --duration ${SECS}s"
  "${CLIENT[@]}" "$DBC" bench --config.file "$cfg" --profile opensearch-pmc --param bulk-size=500 --workers 8 --rate 0 --duration "${SECS}s" --warmup 3s \
    --json "$OUT/dbcanary-closed-$1.json" --html "$OUT/dbcanary-closed-$1.html" > "$OUT/dbcanary-closed-$1.txt" 2> "$OUT/dbcanary-closed-$1.err" \
    || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-closed-$1.err")"
  log "round $1: dbcanary bench --profile opensearch-pmc --workers 8 --rate 20 --duration ${SECS}s"
  "${CLIENT[@]}" "$DBC" bench --config.file "$cfg" --profile opensearch-pmc --param bulk-size=500 --workers 8 --rate 20 --duration "${SECS}s" --warmup 2s \
    --json "$OUT/dbcanary-20rps-$1.json" --html "$OUT/dbcanary-20rps-$1.html" > "$OUT/dbcanary-20rps-$1.txt" 2> "$OUT/dbcanary-20rps-$1.err" \
    || die "dbcanary bench failed: $(tail -5 "$OUT/dbcanary-20rps-$1.err")"
}
st() { jsonq "$1" "[o for s in r['stages'] if s['name']=='$2' for o in s['ops']][0]$3"; }

echo
echo "OpenSearch side by side: $DOCS docs bulk (500/request, 8 clients); term query 8 clients unthrottled, then 20 ops/s; ${SECS}s; $ROUNDS rounds alternating, PIN=${PIN:-0}; outputs in $OUT"
ratios=()
for n in $(seq 1 "$ROUNDS"); do
  c0=$(children_ticks); t0=$(uptime_s); s0=$(server_ticks opensearch)
  osb_round "$n"
  c1=$(children_ticks); t1=$(uptime_s); s1=$(server_ticks opensearch)
  dbcanary_round "$n"
  c2=$(children_ticks); t2=$(uptime_s); s2=$(server_ticks opensearch)
  RES=$OUT/osb-result-$n.md C=$OUT/dbcanary-closed-$n.json R=$OUT/dbcanary-20rps-$n.json
  o_bulk=$(osb "$RES" "Mean Throughput" index-append)
  d_bulk=$(jsonq "$OUT/dbcanary-bulk-$n.json" "[o for s in r['stages'] if s['name']=='index-append' for o in s['ops']][0]['throughput_ops_per_s']*500")
  o_term=$(osb "$RES" "Mean Throughput" term); d_term=$(st "$C" term "['throughput_ops_per_s']")
  o_p50=$(ms2us "$(osb "$RES" "50th percentile latency" term)"); d_p50=$(ms2us "$(st "$C" term "['latency_ms']['p50']")")
  o_20p99=$(ms2us "$(osb "$RES" "99th percentile latency" term-20rps)"); d_20p99=$(ms2us "$(st "$R" term "['latency_ms']['p99']")")
  header "round $n (load $(cut -d' ' -f1 /proc/loadavg))" "OSB"
  o_wall=$(osb_wall "$n")
  row "index-append docs/s, first request to last answer" "$o_wall" "$d_bulk"
  row "  OSB's Mean Throughput (mean of 1 s samples)" "$o_bulk" "$d_bulk"
  B=$OUT/dbcanary-bulk-$n.json
  row "index-append latency p50 (ms)" "$(osb "$RES" "50th percentile latency" index-append)" "$(jsonq "$B" "[o for s in r['stages'] if s['name']=='index-append' for o in s['ops']][0]['latency_ms']['p50']")"
  o_bp99=$(osb "$RES" "99th percentile latency" index-append)
  d_bp99=$(jsonq "$B" "[o for s in r['stages'] if s['name']=='index-append' for o in s['ops']][0]['latency_ms']['p99']")
  row "index-append latency p99 (ms)" "$o_bp99" "$d_bp99"
  row "term mean throughput, unthrottled (ops/s)" "$o_term" "$d_term"
  row "term latency p50, unthrottled (µs)" "$o_p50" "$d_p50"
  row "term at 20 ops/s: throughput (ops/s)" "$(osb "$RES" "Mean Throughput" term-20rps)" "$(st "$R" term "['throughput_ops_per_s']")"
  row "term at 20 ops/s: latency p50 (µs)" "$(ms2us "$(osb "$RES" "50th percentile latency" term-20rps)")" "$(ms2us "$(st "$R" term "['latency_ms']['p50']")")"
  row "term at 20 ops/s: service time p50 (µs)" "$(ms2us "$(osb "$RES" "50th percentile service time" term-20rps)")" "$(ms2us "$(st "$R" term "['service_time_ms']['p50']")")"
  row "term at 20 ops/s: latency p99 (µs)" "$o_20p99" "$d_20p99"
  o_cpu=$(cat "$OUT/osb-cpu-$n"); [ "$o_cpu" = - ] || o_cpu=$(cpu_s "$o_cpu")
  echo "CPU for the round: OSB $o_cpu s for its schedule, its daemonized workers included (bulk, term $((SECS + 3)) s, term at 20/s $((SECS + 2)) s), OpenSearch $(cpu_s $((s1 - s0))) s beside it;" \
    "dbcanary $(cpu_s $((c2 - c1))) s for its three runs (the bulk, then the whole opensearch-pmc profile closed loop, $((SECS + 3)) s a stage, then 20/s: more stages than OSB's), OpenSearch $(cpu_s $((s2 - s1))) s beside it;" \
    "of that, dbcanary's bulk run alone: $(cpu_s "$bulk_cpu") s, OpenSearch $(cpu_s "$bulk_server") s"
  row "OpenSearch CPU busy (% of one core)" "$(busy_pct $((s1 - s0)) "$t0" "$t1")" "$(busy_pct $((s2 - s1)) "$t1" "$t2")"
  echo "dbcanary: every search's hits compared with the expected documents; failed ops $(jsonq "$C" "r['failed']") + $(jsonq "$R" "r['failed']")"
  ratios+=("$(ratio "$d_bulk" "$o_wall") $(ratio "$d_bp99" "$o_bp99") $(ratio "$d_term" "$o_term") $(ratio "$d_p50" "$o_p50") $(ratio "$d_20p99" "$o_20p99")")
done
printf '%s\n' "${ratios[@]}" | medians OSB "above 1: faster for a rate, slower for a latency" "bulk docs/s" "bulk p99" "term ops/s" "term p50" "term p99 at 20 ops/s"
