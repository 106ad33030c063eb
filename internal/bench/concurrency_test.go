package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/probes"
)

// TestConcurrencyFigures: Little's law is the rate of ops that ran times
// their mean time in flight (request sent to end); backlog failures never
// ran and event-driven ops have no worker; the sampled figures are the
// gauge's mean and max.
func TestConcurrencyFigures(t *testing.T) {
	start := mergeStart
	var smps []engine.Sample
	// Over 2 s: 8 ops 250 ms in flight each (sent 50 ms after their slot)
	// = 2 s busy: 1 in flight on average, at 4 ops/s.
	for k := range 8 {
		at := start.Add(time.Duration(k) * 200 * time.Millisecond)
		smps = append(smps, engine.Sample{Op: "read", Intended: at, Sent: at.Add(50 * time.Millisecond), End: at.Add(300 * time.Millisecond)})
	}
	smps = append(smps,
		engine.Sample{Op: "read", Intended: start, Sent: start, End: start.Add(time.Second), Err: probes.Fail(probes.CauseBacklog, errors.New("b"))},
		engine.Sample{Op: "consume", Async: true, Intended: start, Sent: start, End: start.Add(time.Second)})
	rec := newStageRecord(stageSpec{Stage: engine.Stage{Workers: 4, Duration: 2 * time.Second}, Name: "s"}, start)
	for _, s := range smps {
		rec.record(s)
	}
	rec.result = engine.StageResult{Start: start, End: start.Add(2 * time.Second)}
	s := &sampler{ops: map[string]*inFlightGauge{}}
	for _, n := range []int64{0, 3, 1, 2} {
		s.sample(fakeInFlight{"read": n})
	}
	sr := rec.report(s)
	read := sr.Op("read").Concurrency
	want := Concurrency{Limit: 4, Rate: 4, MeanTime: 250, Little: 1, BusySeconds: 2, SampledMean: 1.5, SampledMax: 3, Samples: 4, SampleMS: 10}
	if *read != want {
		t.Errorf("read: %+v\nwant %+v", *read, want)
	}
	if sr.Op("consume").Concurrency != nil {
		t.Error("an event-driven op has in-flight figures")
	}
	if *sr.Concurrency != want {
		t.Errorf("stage: %+v, want the read op's (the only one a worker runs)", *sr.Concurrency)
	}
	if tb := concurrencyTable(&Report{Stages: []StageReport{sr}}); len(tb.Rows) != 2 || tb.Rows[0][4] != "1" || tb.Rows[1][0] != "s/consume" && tb.Rows[1][0] != "s/read" {
		t.Errorf("table rows %v", tb.Rows)
	}
}

type fakeInFlight map[string]int64

func (f fakeInFlight) InFlight(fn func(string, int64)) {
	for op, n := range f {
		fn(op, n)
	}
}

// countingInFlight counts the sampler's calls.
type countingInFlight struct{ calls atomic.Int64 }

func (c *countingInFlight) InFlight(fn func(string, int64)) { c.calls.Add(1); fn("op", 2) }

// The sampler samples on its own until stopped, then hands its gauges over.
func TestSamplerRuns(t *testing.T) {
	src := &countingInFlight{}
	stop := startSampler(src, time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for src.calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s := stop()
	if s.total.n < 3 || s.ops["op"].max != 2 || s.total.sum != 2*s.total.n {
		t.Errorf("after %d calls: total %+v, op %+v", src.calls.Load(), s.total, s.ops["op"])
	}
}

// TestRunConcurrency: a real run of the noop probe (5 ms per op) reports
// each measured stage's concurrency within its limit: Little's mean and the
// sampled max never above the workers, both above zero, in the JSON and in
// the concurrency table. Bounds only: the figures depend on the machine.
func TestRunConcurrency(t *testing.T) {
	cfg := parse(t, "global: {instance_id: c}\ntargets:\n  - {name: n, backend: noop, noop: {delay: 5ms}}\n")
	r, err := Run(context.Background(), Options{Profile: noopProfile(), Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Version: "test", Host: "h", Grace: time.Second, Shard: &Shard{Index: 1, Count: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Instance, "-bench-s1-") {
		t.Errorf("instance %q: driver 1's namespace should name it", r.Instance)
	}
	for _, s := range measured(r) {
		c := s.Concurrency
		if c == nil || c.Limit != s.Workers || c.Little <= 0 || c.Little > float64(s.Workers) || c.SampledMax > int64(s.Workers) ||
			c.Samples == 0 || c.SampledMean > float64(s.Workers) || c.MeanTime < 5 {
			t.Errorf("stage %s (%d workers): %+v", s.Name, s.Workers, c)
		}
		if s.Started.IsZero() || !s.Ended.After(s.Started) || s.OverallHist.Count != s.Overall.Count {
			t.Errorf("stage %s: window %s..%s, overall histogram %d of %d", s.Name, s.Started, s.Ended, s.OverallHist.Count, s.Overall.Count)
		}
	}
	tb := tableByID(r, "concurrency")
	if tb == nil || len(tb.Rows) != 2 || tb.Rows[0][0] != "closed" || tb.Rows[1][0] != "open" {
		t.Fatalf("concurrency table %+v", tb)
	}
}
