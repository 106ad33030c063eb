package bench

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/probes"
)

var mergeStart = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)

// floorSpec is the shape of the synthetic drivers' one stage.
var floorSpec = stageSpec{Stage: engine.Stage{Workers: 2, Duration: 10 * time.Second}, Name: "floor"}

// samples are n random ops over the 10 s from start: latencies from 20 µs
// to a few ms, one in 20 failed, one in 50 a backlog failure, each with a phase.
func samples(rng *rand.Rand, n int, start time.Time) []engine.Sample {
	var out []engine.Sample
	for range n {
		intended := start.Add(time.Duration(rng.Int64N(int64(9900 * time.Millisecond))))
		sent := intended.Add(time.Duration(rng.Int64N(int64(50 * time.Microsecond))))
		end := sent.Add(20*time.Microsecond + time.Duration(rng.ExpFloat64()*float64(time.Millisecond)))
		s := engine.Sample{Op: "noop", Intended: intended, Sent: sent, End: end,
			Phases: []probes.Phase{{Name: "first_byte", Duration: end.Sub(sent) / 2}}}
		switch k := rng.IntN(100); {
		case k < 2:
			s.Err = probes.Fail(probes.CauseBacklog, errors.New("backlog"))
		case k < 7:
			s.Err = probes.Fail(probes.CauseTimeout, errors.New("slow"))
		}
		out = append(out, s)
	}
	return out
}

// record runs samples through a stage's recorder as the engine would and
// returns the stage's report, with the counted in-flight figures c.
func record(start time.Time, smps []engine.Sample, c counted) StageReport {
	rec := newStageRecord(floorSpec, start)
	for _, s := range smps {
		rec.record(s)
	}
	rec.result = engine.StageResult{Issued: int64(len(smps)), Start: start, End: start.Add(10 * time.Second)}
	return rec.report(c, map[string]counted{"noop": c})
}

// driver is the JSON report driver i of n wrote, read back.
func driver(t *testing.T, i, n int, st StageReport) *Report {
	t.Helper()
	r := &Report{Profile: "floor", Backend: "noop", Target: "floor", Version: "test", Host: "h", Started: st.Started, Finished: st.Ended,
		Params: []Param{{"profile", "floor"}, {"duration", "10s"}, {"workers", "2"}}, Stages: []StageReport{st},
		Shard: &Shard{Index: i, Count: n, StartAt: mergeStart}}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(&b, "driver")
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestMergeIsUnion: merging the drivers' reports gives the report of all
// their samples together: counts add up, every percentile and histogram is
// the union's, plot intervals too, and rates and in-flight means add up.
func TestMergeIsUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []engine.Sample
	var reports []*Report
	var names []string
	for i := range 3 {
		smps := samples(rng, 5000+1000*i, mergeStart)
		all = append(all, smps...)
		reports = append(reports, driver(t, i, 3, record(mergeStart, smps, counted{mean: float64(i + 1), max: int64(i + 1)})))
		names = append(names, "d"+string(rune('0'+i)))
	}
	union := record(mergeStart, all, counted{})
	m, err := Merge(reports, names, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := m.Stages[0]
	o, u := st.Ops[0], union.Ops[0]
	if o.Count != u.Count || o.OK != u.OK || o.Failed != u.Failed || o.Count != uint64(len(all)) || !reflect.DeepEqual(o.Causes, u.Causes) {
		t.Errorf("counts: merged %d (ok %d, failed %d, %v), union %d (ok %d, failed %d, %v)", o.Count, o.OK, o.Failed, o.Causes, u.Count, u.OK, u.Failed, u.Causes)
	}
	for what, pair := range map[string][2]any{
		"latency": {o.Latency, u.Latency}, "service time": {o.Service, u.Service}, "phases": {o.Phases, u.Phases},
		"raw histograms": {o.Histograms, u.Histograms}, "overall": {st.Overall, union.Overall}, "overall histogram": {st.OverallHist, union.OverallHist},
		"plot intervals": {o.Series, u.Series},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: merged %+v\nunion %+v", what, pair[0], pair[1])
		}
	}
	if math.Abs(o.Throughput-u.Throughput) > 1e-9*u.Throughput || math.Abs(st.Throughput-union.Throughput) > 1e-9*union.Throughput {
		t.Errorf("throughput: merged %g (stage %g), union %g (stage %g)", o.Throughput, st.Throughput, u.Throughput, union.Throughput)
	}
	c, uc := st.Concurrency, union.Concurrency
	if c.Limit != 6 || math.Abs(c.Little-uc.Little) > 1e-9 || math.Abs(c.Rate-uc.Rate) > 1e-9 || c.CountedMean != 6 || c.CountedMax != 6 || !c.MaxIsSum {
		t.Errorf("concurrency: merged %+v, union %+v (want limit 6, counted mean 1+2+3, max ≤ 6)", c, uc)
	}
	if len(m.Drivers) != 3 || m.Drivers[2].Stages[0].Count != uint64(7000) || st.Seconds != 10 {
		t.Errorf("drivers %+v, seconds %g", m.Drivers, st.Seconds)
	}
	if tb := tableByID(m, "drivers"); tb == nil || len(tb.Rows) != 4 || tb.Rows[3][1] != "all" || tb.Rows[3][5] != "18000" {
		t.Errorf("drivers table: %+v", tb)
	}
	var html bytes.Buffer
	if err := m.WriteHTML(&html); err != nil || !strings.Contains(html.String(), "Drivers (Mongoose") {
		t.Errorf("HTML of the merged report: %v", err)
	}
}

func tableByID(r *Report, id string) *Table {
	for i := range r.Tables {
		if r.Tables[i].ID == id {
			return &r.Tables[i]
		}
	}
	return nil
}

// TestMergeRefuses: reports of different runs, or not of one whole run, are
// refused with an error naming what differs.
func TestMergeRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fresh := func() []*Report {
		var out []*Report
		for i := range 2 {
			out = append(out, driver(t, i, 2, record(mergeStart, samples(rng, 200, mergeStart), counted{})))
		}
		return out
	}
	for _, c := range []struct {
		name string
		edit func(r []*Report) []*Report
		want string
	}{
		{"profile", func(r []*Report) []*Report { r[1].Profile = "ycsb-a"; return r }, `a.json and b.json: different profiles ("floor", "ycsb-a")`},
		{"params", func(r []*Report) []*Report { r[1].Params[2].Value = "4"; return r }, `different parameters ("profile=floor duration=10s workers=2", "profile=floor duration=10s workers=4")`},
		{"target", func(r []*Report) []*Report { r[1].Target = "other"; return r }, `different targets ("floor (noop)", "other (noop)")`},
		{"start", func(r []*Report) []*Report { r[1].Shard.StartAt = mergeStart.Add(time.Second); return r }, "different start times (--start-at)"},
		{"stage", func(r []*Report) []*Report { r[1].Stages[0].Workers = 3; return r }, "different stage 1"},
		{"missing", func(r []*Report) []*Report { return r[:1] }, "the run had 2 drivers, 1 reports given: driver(s) 1 missing"},
		{"twice", func(r []*Report) []*Report { r[1].Shard.Index = 0; return r }, "a.json and b.json: both are driver 0/2"},
		{"count", func(r []*Report) []*Report { r[1].Shard.Count = 3; return r }, "b.json: driver 1/3 of 3 drivers, a.json: of 2"},
		{"unsharded", func(r []*Report) []*Report { r[0].Shard = nil; return r }, "a.json: not a driver's report (run each driver with --shard i/N and --start-at)"},
		{"windows", func(r []*Report) []*Report {
			r[1].Stages[0].Started, r[1].Stages[0].Ended = mergeStart.Add(20*time.Second), mergeStart.Add(30*time.Second)
			return r
		}, "stage floor: the drivers' windows do not overlap (driver 0 03:00:00.000..03:00:10.000, driver 1 03:00:20.000..03:00:30.000)"},
		{"histogram", func(r []*Report) []*Report { r[1].Stages[0].Ops[0].Count++; return r }, "b.json: floor/noop: the latency histogram holds"},
		{"no histograms", func(r []*Report) []*Report { r[1].Stages[0].Ops[0].Histograms.Latency.Bits = 0; return r },
			"b.json: floor/noop has no raw histograms (written by an older dbcanary)"},
		{"bucket", func(r []*Report) []*Report { r[0].Stages[0].Ops[0].Histograms.Service.Buckets[0][0] += 3; return r },
			"a.json: floor/noop service time: bucket"},
	} {
		_, err := Merge(c.edit(fresh()), []string{"a.json", "b.json"}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	// A setup stage (not compared) may end at different times on each driver.
	r := fresh()
	for _, d := range r {
		d.Stages[0].Setup = true
	}
	r[1].Stages[0].Started, r[1].Stages[0].Ended = mergeStart.Add(20*time.Second), mergeStart.Add(30*time.Second)
	if m, err := Merge(r, []string{"a.json", "b.json"}, nil); err != nil || m.Stages[0].Seconds != 0 || !strings.Contains(strings.Join(m.Notes, "\n"), "windows did not overlap") {
		t.Errorf("setup stages that do not overlap: %v", err)
	}
	if _, err := ReadReport(strings.NewReader(`{"profile": "floor"}`), "x.json"); err == nil || err.Error() != "x.json: not a bench JSON report (no profile or no stages)" {
		t.Errorf("a report without stages: %v", err)
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string]string{
		"1/4": "", "0/1": "", "4/4": `"4/4": the index must be 0..3 (drivers count from 0)`,
		"-1/2": `"-1/2": the index must be 0..1 (drivers count from 0)`, "1/0": `"1/0": the driver count must be 1..1000`,
		"2": `"2": want INDEX/COUNT, e.g. 0/4 (the first of four drivers)`, "a/b": `"a/b": want INDEX/COUNT, e.g. 0/4 (the first of four drivers)`,
	} {
		_, _, err := ParseShard(in)
		if got := ""; err != nil {
			got = err.Error()
			if got != want {
				t.Errorf("%s: %q, want %q", in, got, want)
			}
		} else if want != "" {
			t.Errorf("%s: no error, want %q", in, want)
		}
	}
	if k := (&Shard{Index: 3, Count: 4}).kind(); k != "bench-s3" {
		t.Errorf("kind %q", k)
	}
	plan := nextPlan(mergeStart, stageSpec{Stage: engine.Stage{Duration: 20 * time.Second}, Warmup: 3 * time.Second})
	if want := mergeStart.Add(26 * time.Second); !plan.Equal(want) {
		t.Errorf("next stage at %s, want %s (warm-up + %s + duration + %s)", plan, want, warmGap, stageGap)
	}
	if at := measureAt(mergeStart, stageSpec{Warmup: 3 * time.Second}); !at.Equal(mergeStart.Add(4 * time.Second)) {
		t.Errorf("measured part at %s, want the warm-up and %s after the plan", at, warmGap)
	}
	if !nextPlan(mergeStart, stageSpec{Stage: engine.Stage{MaxOps: 10}}).IsZero() {
		t.Error("a stage that ends at an op count has no common end")
	}
}
