// Command recheck judges a recorded make soak-chaos run again with the
// current checker (test/chaos/history) and prints its table: after a change
// to the checker, a 2-hour run's records need not be recorded again to see
// the new verdict.
//
//	go run ./test/chaos/recheck [flags] RUN_DIR
//
// RUN_DIR is the run's directory (artefacts/<time>/<time>-seed<N>, with
// nemesis.jsonl, notifications.jsonl, samples.jsonl, leftovers.jsonl). Runs
// recorded before the samples counted the series failures create on first
// use (6 Dec 2026) can take those counts from the run's own Prometheus:
// start one on a copy of RUN_DIR/prometheus/data and pass --prometheus.
// The same Prometheus gives runs recorded before 6 Dec 2026 19:00 when each
// firing notification's alerts began firing (history.Note.Since, from the
// ALERTS series of its group), so a fault owns only what fired after it.
// Exit status 1 when the run fails its checker, 2 on a usage or read error.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/dbcanary/dbcanary/test/chaos/history"
)

// firstUseQueries are the series failures create on first use, and the most
// the layout allows (history.ReadScrape's rules, in PromQL over the run's
// Prometheus).
func firstUseQueries() (count, most string) {
	var causes []string
	for _, c := range history.LazyCauses() {
		causes = append(causes, string(c))
	}
	lazy := strings.Join(causes, "|")
	count = `count({job="dbcanary",__name__=~"dbcanary_op_(latency|service_time)_seconds_(bucket|sum|count)",result="error"} or vector(0)) - 1 + ` +
		`count(dbcanary_op_failures_total{cause=~"` + lazy + `"} or vector(0)) - 1`
	most = `count({job="dbcanary",__name__=~"dbcanary_op_(latency|service_time)_seconds_(bucket|sum|count)",result="ok"}) + ` +
		strconv.Itoa(len(causes)) + ` * count(count by (target, backend, op) (dbcanary_op_failures_total))`
	return count, most
}

func main() {
	prom := flag.String("prometheus", "", "URL of a Prometheus serving the run's TSDB, to count the series failures create on first use")
	lossy := flag.String("lossy", "mq-lossy", "the target configured to lose acknowledged writes")
	seed := flag.String("seed", "?", "the run's seed, for the table's first line")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: recheck [--prometheus URL] [--lossy TARGET] [--seed N] RUN_DIR")
		os.Exit(2)
	}
	code, err := run(flag.Arg(0), *prom, *lossy, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recheck:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(dir, prom, lossy, seed string) (int, error) {
	h, err := history.Load(dir, time.Time{}, time.Time{})
	if err != nil {
		return 0, err
	}
	if len(h.Samples) < 2 {
		return 0, fmt.Errorf("%s: fewer than 2 samples in %s", dir, history.FileSamples)
	}
	h.Start, h.End = h.Samples[0].At.Truncate(time.Second), h.Samples[len(h.Samples)-1].At
	if prom != "" {
		client, err := api.NewClient(api.Config{Address: prom})
		if err != nil {
			return 0, fmt.Errorf("--prometheus %q: %w", prom, err)
		}
		papi := promv1.NewAPI(client)
		countQ, mostQ := firstUseQueries()
		for i := range h.Samples {
			s := &h.Samples[i]
			if s.FirstUse, err = instant(papi, countQ, s.At); err != nil {
				return 0, fmt.Errorf("--prometheus %q: %w", prom, err)
			}
			if s.FirstUseMax, err = instant(papi, mostQ, s.At); err != nil {
				return 0, fmt.Errorf("--prometheus %q: %w", prom, err)
			}
		}
		for i := range h.Notes {
			n := &h.Notes[i]
			if n.Status != "firing" || !n.Since.IsZero() {
				continue
			}
			if n.Since, err = since(papi, *n); err != nil {
				return 0, fmt.Errorf("--prometheus %q: %w", prom, err)
			}
		}
	}
	run := h.End.Sub(h.Start).Round(time.Minute)
	r := history.Check(h, history.RunOptions(run, lossy))
	fmt.Printf("make soak-chaos SEED=%s DURATION=%s: %s to %s UTC, judged again by test/chaos/recheck\n\n%s",
		seed, run, h.Start.UTC().Format("2006-01-02 15:04"), h.End.UTC().Format("15:04"), r.Table(h.Start))
	if r.Failed() {
		return 1, nil
	}
	return 0, nil
}

// instant evaluates a query that returns one number at t (0 when nothing
// was scraped yet at t).
func instant(papi promv1.API, query string, t time.Time) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, _, _, err := papi.Query(ctx, query, t)
	if err != nil {
		return 0, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return 0, fmt.Errorf("%s: a %s, not a vector", query, v.Type())
	}
	if len(vec) == 0 {
		return 0, nil
	}
	return float64(vec[0].Value), nil
}

// alertStep is the resolution the ALERTS series are read at: half the run's
// rule evaluation interval (history.ScrapeEvery).
const alertStep = history.ScrapeEvery / 2

// since is when the newest firing alert of a firing notification's group
// began firing, from the run's ALERTS series (zero when none is found: the
// checker then judges the note by its arrival alone, as before).
func since(papi promv1.API, n history.Note) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, _, _, err := papi.QueryRange(ctx, alertsQuery(n.GroupLabels), promv1.Range{Start: n.At.Add(-2 * time.Hour), End: n.At, Step: alertStep})
	if err != nil {
		return time.Time{}, err
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return time.Time{}, fmt.Errorf("ALERTS: a %s, not a matrix", v.Type())
	}
	var newest time.Time
	for _, ser := range m {
		ts := make([]time.Time, 0, len(ser.Values))
		for _, p := range ser.Values {
			ts = append(ts, p.Timestamp.Time())
		}
		if s := firingSince(ts, n.At, 2*alertStep); s.After(newest) {
			newest = s
		}
	}
	return newest, nil
}

// alertsQuery selects the firing ALERTS series of a notification group.
func alertsQuery(group map[string]string) string {
	var b strings.Builder
	b.WriteString(`ALERTS{alertstate="firing"`)
	for _, k := range slices.Sorted(maps.Keys(group)) {
		fmt.Fprintf(&b, ",%s=%s", k, strconv.Quote(group[k]))
	}
	b.WriteString("}")
	return b.String()
}

// firingSince is the start of the run of samples (ascending, no gap wider
// than maxGap) that reaches at (its last sample within maxGap of at): when
// the alert began firing. Zero when the series was not firing at at.
func firingSince(ts []time.Time, at time.Time, maxGap time.Duration) time.Time {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].After(at) }) - 1
	if i < 0 || at.Sub(ts[i]) > maxGap {
		return time.Time{}
	}
	for i > 0 && ts[i].Sub(ts[i-1]) <= maxGap {
		i--
	}
	return ts[i]
}
