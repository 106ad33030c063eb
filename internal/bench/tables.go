package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/probes"
)

// tables lays out a profile's result tables.
func tables(r *Report, rf refs, specs []probes.BenchTable) []Table {
	var out []Table
	for _, ts := range specs {
		var t Table
		switch ts.Layout {
		case probes.LayoutSummary:
			t = summaryTable(r, rf, ts.UnitOf)
		case probes.LayoutStress:
			t = stressTable(r)
		case probes.LayoutYCSB:
			t = ycsbTable(r, rf)
		case probes.LayoutPerfTest:
			t = perfTestTable(r, rf, ts)
		case probes.LayoutDownloads:
			t = downloadsTable(r, rf, ts)
		case probes.LayoutFloor:
			t = floorTable(r)
		default:
			t = Table{ID: string(ts.Layout), Title: "unknown table layout " + string(ts.Layout)}
		}
		if ts.ID != "" {
			t.ID = ts.ID
		}
		if ts.Note != "" {
			t.Notes = append(t.Notes, ts.Note)
		}
		out = append(out, t)
	}
	return out
}

// measured are the stages that are compared (setup stages are not).
func measured(r *Report) []*StageReport {
	var out []*StageReport
	for i := range r.Stages {
		if !r.Stages[i].Setup {
			out = append(out, &r.Stages[i])
		}
	}
	return out
}

func task(s *StageReport, op string) string {
	if len(s.Ops) > 1 {
		return s.Name + "/" + op
	}
	return s.Name
}

// intervalRates are the per-interval throughputs of full intervals.
func intervalRates(s *StageReport, o *OpReport) []float64 {
	var v []float64
	for _, p := range o.Series {
		if p.T <= s.Seconds+1e-9 {
			v = append(v, p.OpsPerSec)
		}
	}
	return v
}

// summaryTable is opensearch-benchmark's result table (Metric | Task | Value
// | Unit) for every stage and op, each figure beside its reference.
// unitOf gives an op's throughput unit and the documents per op (nil: ops/s).
func summaryTable(r *Report, rf refs, unitOf func(op string) (string, float64)) Table {
	t := Table{ID: "summary", Title: "Results (opensearch-benchmark layout): every figure beside the documented reference",
		Header:     []string{"Metric", "Task", "Value", "Unit", "Reference", "Ratio", "Verdict"},
		RightAlign: []bool{true, true, true, true, true, true, false}}
	add := func(metric, tk string, c comparison, unit string) {
		t.Rows = append(t.Rows, append([]string{metric, tk, num(c.value), unit}, c.cells()...))
	}
	for _, s := range measured(r) {
		for i := range s.Ops {
			o := &s.Ops[i]
			tk := task(s, o.Op)
			unit, mult := "ops/s", 1.0
			if unitOf != nil {
				unit, mult = unitOf(o.Op)
			}
			if rates := intervalRates(s, o); len(rates) > 0 {
				slices.Sort(rates)
				add("Min Throughput", tk, comparison{value: rates[0] * mult}, unit)
				add("Mean Throughput", tk, rf.rateRef(r.Backend, o.Op, unit, o.Throughput*mult), unit)
				add("Median Throughput", tk, comparison{value: rates[len(rates)/2] * mult}, unit)
				add("Max Throughput", tk, comparison{value: rates[len(rates)-1] * mult}, unit)
			} else {
				add("Mean Throughput", tk, rf.rateRef(r.Backend, o.Op, unit, o.Throughput*mult), unit)
			}
			for _, q := range []struct {
				name  string
				stat  string
				v, sv float64
			}{{"50th", "p50", o.Latency.P50, o.Service.P50}, {"90th", "p90", o.Latency.P90, o.Service.P90},
				{"99th", "p99", o.Latency.P99, o.Service.P99}, {"100th", "", o.Latency.Max, o.Service.Max}} {
				c := comparison{value: q.v}
				if q.stat != "" {
					c = rf.latencyRef(r.Backend, o.Op, "", q.stat, q.v)
				}
				add(q.name+" percentile latency", tk, c, "ms")
			}
			for _, q := range []struct {
				name string
				v    float64
			}{{"50th", o.Service.P50}, {"90th", o.Service.P90}, {"99th", o.Service.P99}, {"100th", o.Service.Max}} {
				add(q.name+" percentile service time", tk, comparison{value: q.v}, "ms")
			}
			for _, ph := range sortedKeys(o.Phases) {
				sum := o.Phases[ph]
				for _, q := range []struct {
					name, stat string
					v          float64
				}{{"50th", "p50", sum.P50}, {"99th", "p99", sum.P99}} {
					add(q.name+" percentile "+ph, tk, rf.latencyRef(r.Backend, o.Op, ph, q.stat, q.v), "ms")
				}
			}
			add("error rate", tk, comparison{value: o.ErrorRate * 100}, "%")
		}
	}
	t.Notes = []string{"Latency counts from each op's intended start (open loop: its slot in the schedule; closed loop: when its worker took it); service time from when its request was sent.",
		"Verdict: a latency is within its reference when at or below it, a throughput when at or above it. Reference figures come from the baseline file's sources " + strings.Join(rf.sources, ", ") + "."}
	return t
}

// stressTable is cassandra-stress's per-op summary (op rate, latency mean,
// median, 95th, 99th, 99.9th, max, errors).
func stressTable(r *Report) Table {
	t := Table{ID: "stress", Title: "Results (cassandra-stress layout), latency in ms",
		Header:     []string{"Task", "Op", "Op rate (op/s)", "Latency mean", "median", "95th", "99th", "99.9th", "max", "Total errors"},
		RightAlign: []bool{false, false, true, true, true, true, true, true, true, true}}
	for _, s := range measured(r) {
		row := func(op string, rate float64, l Summary, errs uint64) {
			t.Rows = append(t.Rows, []string{s.Name, op, num(rate), num(l.Mean), num(l.P50), num(l.P95), num(l.P99), num(l.P999), num(l.Max), strconv.FormatUint(errs, 10)})
		}
		var errs uint64
		for _, o := range s.Ops {
			row(o.Op, o.Throughput, o.Latency, o.Failed)
			errs += o.Failed
		}
		if len(s.Ops) > 1 {
			row("total", s.Throughput, s.Overall, errs)
		}
	}
	return t
}

func figureByID(b *baseline.File, id string) (baseline.Figure, bool) {
	if b == nil {
		return baseline.Figure{}, false
	}
	for _, f := range b.Figures {
		if f.ID == id {
			return f, true
		}
	}
	return baseline.Figure{}, false
}

// ycsbTable is the ApsaraDB results row (Load OPS, Load WAVG, Run OPS, Run
// WAVG, Run RAVG, Run RP95, RP99, RP999; latencies in µs) beside the
// documented rows.
func ycsbTable(r *Report, rf refs) Table {
	t := Table{ID: "ycsb", Title: "Results (YCSB / ApsaraDB layout), latency in µs",
		Header:     []string{"", "Thread", "Load OPS", "Load WAVG", "Run OPS", "Run WAVG", "Run RAVG", "Run RP95", "Run RP99", "Run RP999"},
		RightAlign: []bool{false, true, true, true, true, true, true, true, true, true}}
	us := func(v float64) float64 { return v * 1000 }
	var load, run *StageReport
	for i := range r.Stages {
		switch r.Stages[i].Name {
		case "load":
			load = &r.Stages[i]
		case "run":
			run = &r.Stages[i]
		}
	}
	nan := math.NaN()
	got := []float64{nan, nan, nan, nan, nan, nan, nan, nan}
	threads := "-"
	if load != nil {
		if o := load.Op("update"); o != nil {
			got[0], got[1] = o.Throughput, us(o.Latency.Mean)
		}
		threads = strconv.Itoa(load.Workers)
	}
	if run != nil {
		got[2] = run.Throughput
		if o := run.Op("update"); o != nil {
			got[3] = us(o.Latency.Mean)
		}
		if o := run.Op("read"); o != nil {
			got[4] = us(o.Latency.Mean)
		}
		got[5], got[6], got[7] = us(run.Overall.P95), us(run.Overall.P99), us(run.Overall.P999)
		threads += "/" + strconv.Itoa(run.Workers)
	}
	row := func(name, threads string, v []float64) {
		cells := []string{name, threads}
		for _, x := range v {
			cells = append(cells, num(x))
		}
		t.Rows = append(t.Rows, cells)
	}
	row("this run", threads, got)
	// The documented 80 % CPU row: 4 vCPU / 8 GB x 3 nodes, 100/100 threads.
	ref := []float64{nan, nan, nan, nan, nan, nan, nan, nan}
	ids := []string{"", "ycsb-insert-avg", "ycsb-run-rate", "ycsb-update-avg", "ycsb-read-avg", "ycsb-p95", "ycsb-p99", "ycsb-p999"}
	for i, id := range ids {
		if f, ok := figureByID(rf.b, id); ok {
			if f.Kind == baseline.KindThroughput {
				ref[i] = f.Value
			} else {
				ref[i] = f.Seconds() * 1e6
			}
		}
	}
	if !math.IsNaN(ref[1]) {
		ref[0] = 32277 // Load OPS of the same row; the baseline file keeps only run figures
	}
	row("reference 80 % CPU", "100/100", ref)
	ratios, verdicts := []string{"ratio", ""}, []string{"verdict", ""}
	for i := range got {
		c := comparison{value: got[i], ref: ref[i], has: !math.IsNaN(got[i]) && !math.IsNaN(ref[i]), higher: i == 0 || i == 2}
		ratios = append(ratios, c.cells()[1])
		verdicts = append(verdicts, c.verdict())
	}
	t.Rows = append(t.Rows, ratios, verdicts)
	light := []float64{nan, nan, nan, nan, nan, nan, nan, nan}
	if f, ok := figureByID(rf.b, "ycsb-light-p99"); ok {
		light[6] = f.Seconds() * 1e6
		row("reference 60 % CPU", "100/16", light)
	}
	t.Notes = []string{"Run RP95/RP99/RP999 are over every op of the run (reads and updates), as YCSB's overall figures."}
	return t
}

// perfTestTable is PerfTest's summary and the reference's key result points
// of the publishing (ts.Send) and consuming (ts.Receive) ops.
func perfTestTable(r *Report, rf refs, ts probes.BenchTable) Table {
	t := Table{ID: "perftest", Title: "Results (PerfTest layout): key result points",
		Header:     []string{"Metric", "Unit", "Result", "Reference", "Ratio", "Verdict"},
		RightAlign: []bool{false, false, true, true, true, false}}
	for _, s := range measured(r) {
		pub, con := s.Op(ts.Send), s.Op(ts.Receive)
		if pub != nil {
			c := rf.rateRef(r.Backend, ts.Send, "msg/s", pub.Throughput)
			t.Rows = append(t.Rows, append([]string{"Publisher throughput (the sending rate)", "messages / second", num(c.value)}, c.cells()...))
		}
		if con != nil {
			c := rf.rateRef(r.Backend, ts.Receive, "msg/s", con.Throughput)
			t.Rows = append(t.Rows, append([]string{"Consumer throughput (the receiving rate)", "messages / second", num(c.value)}, c.cells()...))
		}
		five := func(l Summary) string {
			return fmt.Sprintf("%.0f/%.0f/%.0f/%.0f/%.0f", l.Min*1000, l.P50*1000, l.P75*1000, l.P95*1000, l.P99*1000)
		}
		if pub != nil {
			t.Rows = append(t.Rows, []string{"confirm latency min/median/75th/95th/99th", "µs", five(pub.Latency), "-", "-", "-"},
				[]string{"messages confirmed / failed", "messages", fmt.Sprintf("%d / %d", pub.OK, pub.Failed), "-", "-", "-"})
		}
		if con != nil {
			t.Rows = append(t.Rows, []string{"consumer latency min/median/75th/95th/99th", "µs", five(con.Latency), "-", "-", "-"},
				[]string{"messages consumed and verified / failed (lost)", "messages", fmt.Sprintf("%d / %d (%d)", con.OK, con.Failed, con.Causes[string(probes.CauseLost)]), "-", "-", "-"})
		}
	}
	t.Notes = []string{"confirm latency: from the publish's start to the broker's confirm; consumer latency: from the publish's start to receipt (PerfTest measures it from a timestamp in the body)."}
	return t
}

// downloadsTable is s3-benchmark's download table for one group (object
// size): throughput and time to first and last byte per thread count, in ms.
func downloadsTable(r *Report, rf refs, ts probes.BenchTable) Table {
	g := ts.Group
	t := Table{ID: "downloads-" + g, Title: fmt.Sprintf("Download performance with %s objects", g),
		Header: []string{"Threads", "Throughput",
			"TTFB avg", "min", "p25", "p50", "p75", "p90", "p99", "max",
			"TTLB avg", "min", "p25", "p50", "p75", "p90", "p99", "max", "Verdict"}}
	for i := range t.Header {
		t.RightAlign = append(t.RightAlign, i < len(t.Header)-1)
	}
	op, first, last := ts.Op, ts.Phases[0], ts.Phases[1]
	ms0 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for i := range r.Stages {
		s := &r.Stages[i]
		if s.Group != g {
			continue
		}
		if s.Setup {
			if o := s.Op(ts.SetupOp); o != nil {
				t.Notes = append(t.Notes, fmt.Sprintf("Setup: uploaded %d %s objects with %d threads in %.1f s (put p50 %s ms, %d failed).", o.OK, g, s.Workers, s.Seconds, num(o.Latency.P50), o.Failed))
			}
			continue
		}
		o := s.Op(op)
		if o == nil {
			continue
		}
		fb, lb := o.Phases[first], o.Phases[last]
		row := []string{strconv.Itoa(s.Workers), fmt.Sprintf("%.1f MB/s", o.MiBps)}
		for _, sum := range []Summary{fb, lb} {
			row = append(row, ms0(sum.Mean), ms0(sum.Min), ms0(sum.P25), ms0(sum.P50), ms0(sum.P75), ms0(sum.P90), ms0(sum.P99), ms0(sum.Max))
		}
		var beyond []string
		checks := []comparison{
			rf.rateRef(r.Backend, op, "MB/s", o.MiBps),
			rf.latencyRef(r.Backend, op, first, "p50", fb.P50), rf.latencyRef(r.Backend, op, first, "p99", fb.P99),
			rf.latencyRef(r.Backend, op, last, "p50", lb.P50), rf.latencyRef(r.Backend, op, last, "p99", lb.P99),
		}
		names := []string{"throughput", "TTFB p50", "TTFB p99", "TTLB p50", "TTLB p99"}
		compared := false
		for j, c := range checks {
			if !c.has {
				continue
			}
			compared = true
			if c.verdict() != VerdictWithin {
				beyond = append(beyond, fmt.Sprintf("%s %s (%s)", names[j], c.verdict(), ratio(c.ratio())))
			}
		}
		switch {
		case !compared:
			row = append(row, "-")
		case len(beyond) == 0:
			row = append(row, VerdictWithin)
		default:
			row = append(row, strings.Join(beyond, "; "))
		}
		t.Rows = append(t.Rows, row)
	}
	// The reference: the upper end of the documented 8..16-thread range.
	ref := []string{"reference", "-"}
	if f, ok := rf.find(r.Backend, op, "", "rate"); ok {
		ref[1] = f.Quoted
	}
	for _, ph := range []string{first, last} {
		cells := []string{"-", "-", "-", "-", "-", "-", "-", "-"}
		if f, ok := rf.find(r.Backend, op, ph, "p50"); ok {
			cells[3] = f.Quoted
		}
		if f, ok := rf.find(r.Backend, op, ph, "p99"); ok {
			cells[6] = f.Quoted
		}
		ref = append(ref, cells...)
	}
	t.Rows = append(t.Rows, append(ref, ""))
	return t
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// floorTable sets latency and service time side by side.
func floorTable(r *Report) Table {
	t := Table{ID: "floor", Title: "Measurement floor (µs): latency from the slot, service time from the call, and their difference",
		Header: []string{"Task", "Ops", "", "p50", "p90", "p99", "max"}, RightAlign: []bool{false, true, false, true, true, true, true}}
	us := func(v float64) string { return strconv.FormatFloat(v*1000, 'f', 0, 64) }
	for _, s := range measured(r) {
		for _, o := range s.Ops {
			l, sv := o.Latency, o.Service
			n := strconv.FormatUint(o.Count, 10)
			t.Rows = append(t.Rows,
				[]string{s.Name, n, "latency", us(l.P50), us(l.P90), us(l.P99), us(l.Max)},
				[]string{s.Name, n, "service time", us(sv.P50), us(sv.P90), us(sv.P99), us(sv.Max)},
				[]string{s.Name, n, "latency - service", us(l.P50 - sv.P50), us(l.P90 - sv.P90), us(l.P99 - sv.P99), "-"})
		}
	}
	return t
}
