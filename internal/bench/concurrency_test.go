package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/probes"
)

// TestConcurrencyFigures: Little's law is the rate of ops that ran times
// their mean time in flight (request sent to end); backlog failures never
// ran and event-driven ops have no worker; the counted figures are the
// window's.
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
	c := counted{mean: 1.5, max: 3}
	sr := rec.report(c, map[string]counted{"read": c})
	read := sr.Op("read").Concurrency
	want := Concurrency{Limit: 4, Rate: 4, MeanTime: 250, Little: 1, BusySeconds: 2, CountedMean: 1.5, CountedMax: 3}
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

// fakeFlights is a target whose in-flight areas and peaks the test sets.
type fakeFlights struct {
	all engine.Flight
	ops map[string]engine.Flight
}

func (f *fakeFlights) InFlight(time.Time) (engine.Flight, map[string]engine.Flight) {
	return f.all, maps.Clone(f.ops)
}

// A window's mean is the area it saw over its length; its max the peak read
// at its end (the engine starts a peak over at each read).
func TestFlightWindow(t *testing.T) {
	src := &fakeFlights{all: engine.Flight{Area: 5 * time.Second, Peak: 9}, ops: map[string]engine.Flight{"a": {Area: 2 * time.Second, Peak: 9}}}
	w := openFlightWindow(src, mergeStart)
	src.all = engine.Flight{Area: 5*time.Second + 8*time.Second, Peak: 4}
	src.ops = map[string]engine.Flight{"a": {Area: 2*time.Second + 2*time.Second, Peak: 1}, "b": {Area: 6 * time.Second, Peak: 3}}
	all, ops := w.close(mergeStart.Add(4 * time.Second))
	if all != (counted{mean: 2, max: 4}) || ops["a"] != (counted{mean: 0.5, max: 1}) || ops["b"] != (counted{mean: 1.5, max: 3}) {
		t.Errorf("all %+v, ops %+v", all, ops)
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
		if c == nil || c.Limit != s.Workers || c.Little <= 0 || c.Little > float64(s.Workers) || c.CountedMax > int64(s.Workers) ||
			c.CountedMax < 1 || c.CountedMean <= 0 || c.CountedMean > float64(s.Workers) || c.MeanTime < 5 {
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
