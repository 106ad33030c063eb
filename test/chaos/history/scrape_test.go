package history

import (
	"strings"
	"testing"
	"time"
)

// A scrape of one op that failed two ways: the error histogram (its ok
// bounds), the error service time and two lazy causes are first-use series;
// the eager causes, a cause outside probes.Causes and everything else are not.
const scrapeText = `# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 3.8e+07
go_goroutines 76
process_open_fds 25
process_start_time_seconds 1.79655317863e+09
dbcanary_ledger_checks_total{age="1m",backend="s3",result="missing",target="s3"} 2
dbcanary_ledger_checks_total{age="1h",backend="s3",result="corrupted",target="s3"} 1
dbcanary_ledger_checks_total{age="1m",backend="s3",result="intact",target="s3"} 40
dbcanary_op_latency_seconds_bucket{backend="cassandra",op="read",result="ok",target="cas",le="0.005"} 10
dbcanary_op_latency_seconds_bucket{backend="cassandra",op="read",result="ok",target="cas",le="+Inf"} 12
dbcanary_op_latency_seconds_sum{backend="cassandra",op="read",result="ok",target="cas"} 0.1
dbcanary_op_latency_seconds_count{backend="cassandra",op="read",result="ok",target="cas"} 12
dbcanary_op_latency_seconds_bucket{backend="cassandra",op="read",result="error",target="cas",le="0.005"} 0
dbcanary_op_latency_seconds_bucket{backend="cassandra",op="read",result="error",target="cas",le="+Inf"} 3
dbcanary_op_latency_seconds_sum{backend="cassandra",op="read",result="error",target="cas"} 3
dbcanary_op_latency_seconds_count{backend="cassandra",op="read",result="error",target="cas"} 3
dbcanary_op_service_time_seconds_bucket{backend="cassandra",op="read",result="ok",target="cas",le="+Inf"} 12
dbcanary_op_service_time_seconds_sum{backend="cassandra",op="read",result="ok",target="cas"} 0.1
dbcanary_op_service_time_seconds_count{backend="cassandra",op="read",result="ok",target="cas"} 12
dbcanary_op_service_time_seconds_bucket{backend="cassandra",op="read",result="error",target="cas",le="+Inf"} 3
dbcanary_op_service_time_seconds_sum{backend="cassandra",op="read",result="error",target="cas"} 3
dbcanary_op_service_time_seconds_count{backend="cassandra",op="read",result="error",target="cas"} 3
dbcanary_op_failures_total{backend="cassandra",cause="not_found",op="read",target="cas"} 0
dbcanary_op_failures_total{backend="cassandra",cause="mismatch",op="read",target="cas"} 0
dbcanary_op_failures_total{backend="cassandra",cause="lost",op="read",target="cas"} 0
dbcanary_op_failures_total{backend="cassandra",cause="backlog",op="read",target="cas"} 0
dbcanary_op_failures_total{backend="cassandra",cause="timeout",op="read",target="cas"} 2
dbcanary_op_failures_total{backend="cassandra",cause="refused",op="read",target="cas"} 1
dbcanary_op_failures_total{backend="cassandra",cause="bogus",op="read",target="cas"} 1
dbcanary_target_up{backend="cassandra",target="cas"} 1
`

func TestReadScrape(t *testing.T) {
	var s Sample
	if err := ReadScrape(strings.NewReader(scrapeText), &s); err != nil {
		t.Fatal(err)
	}
	want := Sample{RSS: 3.8e7, Goroutines: 76, OpenFDs: 25, Start: 1.79655317863e9, Series: 29,
		// error latency 4 + error service time 3 + timeout, refused
		FirstUse: 9,
		// per op: the ok histogram's 4 lines + the ok service time's 3 + the 9 lazy causes
		FirstUseMax: 16}
	if s.RSS != want.RSS || s.Goroutines != want.Goroutines || s.OpenFDs != want.OpenFDs || s.Start != want.Start ||
		s.Series != want.Series || s.FirstUse != want.FirstUse || s.FirstUseMax != want.FirstUseMax {
		t.Errorf("got %+v\nwant %+v", s, want)
	}
	if s.LedgerLost["s3"] != 3 || len(s.LedgerLost) != 1 {
		t.Errorf("ledger lost: got %v, want s3: 3", s.LedgerLost)
	}
}

// Failures create series on first use, in steps (docs/sizing.md): a run that
// meets many faults gains them up to the documented bound, which is the
// layout, not growth (the 2-hour run of 6 Dec 2026, SEED=1, failed "series
// flat" on 443 of them). Growth of the other series, or first-use series
// beyond the bound, still fails the run.
func TestFirstUseSeries(t *testing.T) {
	o := opts
	o.Growth = append(o.Growth, GrowthBound{Metric: MetricSeries, Rel: 0.05, Abs: 100, Warmup: 2 * time.Minute, MinSpan: 5 * time.Minute})
	steps := func(h *History, first func(i int) float64, rest func(i int) float64) {
		for i := range h.Samples {
			h.Samples[i].FirstUse, h.Samples[i].FirstUseMax = first(i), 600
			h.Samples[i].Series = 1400 + rest(i) + first(i)
		}
	}
	step := func(i int) float64 { return float64(i/10) * 150 } // +150 each time a new fault is met
	cases := map[string]struct {
		first, rest func(int) float64
		fail        bool
		want        string
	}{
		"failure series in steps within the bound": {step, func(int) float64 { return 0 }, false,
			"| series failures create on first use | ok: at most 450, within the documented bound (600 for the ops then) in all 40 samples |"},
		"other series grow": {func(int) float64 { return 0 }, step, true, "| series (those failures create on first use apart) flat | **FAIL**"},
		"failure series beyond the bound": {func(i int) float64 { return step(i) * 2 }, func(int) float64 { return 0 }, true,
			"| series failures create on first use | **FAIL**: 10 of 40 samples above the documented bound, by up to 300 (at +15m0s) |"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := passing()
			steps(&h, c.first, c.rest)
			r := Check(h, o)
			tab := r.Table(t0)
			if r.Failed() != c.fail {
				t.Errorf("failed = %v, want %v:\n%s", r.Failed(), c.fail, tab)
			}
			if !strings.Contains(tab, c.want) {
				t.Errorf("table lacks %q:\n%s", c.want, tab)
			}
		})
	}
}
