package engine

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/probes"
)

func loadTarget(t *testing.T, yaml string) config.Target {
	t.Helper()
	cfg, err := config.Parse([]byte("global: {instance_id: l}\ntargets:\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Targets[0]
}

type samples struct {
	mu sync.Mutex
	s  []Sample
}

func (c *samples) add(s Sample) { c.mu.Lock(); c.s = append(c.s, s); c.mu.Unlock() }

func (c *samples) count(op string, failed bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.s {
		if s.Op == op && (s.Err != nil) == failed {
			n++
		}
	}
	return n
}

func newLoad(t *testing.T, yaml string) *Load {
	t.Helper()
	l, err := NewLoad(loadTarget(t, yaml), "l-bench-000000", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(time.Second) })
	return l
}

// A closed-loop stage stops at its op count exactly, keeps the mix's ratio,
// and a warm-up with no sink records nothing.
func TestLoadClosedLoopOpCount(t *testing.T) {
	l := newLoad(t, "  - {name: n, backend: noop, ops: {noop: {rate: 1}}}\n")
	if err := l.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Run(context.Background(), Stage{Mix: []Weighted{{"noop", 1}}, Workers: 2, MaxOps: 50}); err != nil {
		t.Fatal(err)
	}
	var c samples
	l.SetSink(c.add)
	res, err := l.Run(context.Background(), Stage{Mix: []Weighted{{"noop", 1}}, Workers: 3, MaxOps: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Issued != 1000 || c.count("noop", false) != 1000 {
		t.Fatalf("issued %d, recorded %d ok samples; want 1000 each", res.Issued, c.count("noop", false))
	}
}

func TestLoadSequenceKeepsRatio(t *testing.T) {
	l := newLoad(t, "  - {name: c, backend: noop, ops: {noop: {rate: 1}}}\n")
	l.r.byName["other"] = &opState{op: config.Op{Name: "other", Timeout: time.Second}}
	seq, err := l.sequence([]Weighted{{"noop", 1}, {"other", 4}})
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, s := range seq {
		got += s.op.Name[:1]
	}
	if len(got) != 5 {
		t.Fatalf("sequence %q", got)
	}
	if n := countRune(got, 'n'); n != 1 || len(got) != 5 {
		t.Fatalf("sequence %q: want one noop in five", got)
	}
	for _, bad := range [][]Weighted{{{"missing", 1}}, {{"noop", 0}}, nil} {
		if _, err := l.sequence(bad); err == nil {
			t.Errorf("sequence(%v): no error", bad)
		}
	}
}

func countRune(s string, r rune) int {
	n := 0
	for _, c := range s {
		if c == r {
			n++
		}
	}
	return n
}

// An open-loop stage starts ops on their slots: k/rate apart, for its duration.
func TestLoadOpenLoopSchedule(t *testing.T) {
	l := newLoad(t, "  - {name: n, backend: noop, ops: {noop: {rate: 1}}}\n")
	var c samples
	l.SetSink(c.add)
	res, err := l.Run(context.Background(), Stage{Mix: []Weighted{{"noop", 1}}, Workers: 2, Rate: 200, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Issued != 100 {
		t.Fatalf("issued %d ops in 500ms at 200/s, want 100", res.Issued)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.s) != 100 {
		t.Fatalf("%d samples, want 100", len(c.s))
	}
	for _, s := range c.s {
		if off := s.Intended.Sub(res.Start); off%(5*time.Millisecond) != 0 {
			t.Fatalf("intended start %s after the stage start: not on a 5ms slot", off)
		}
	}
}

// Ops no worker can take in time fail at their timeout (deadlines count
// from the slot, as in the daemon): a stall shows as slow failures, and the
// schedule is never thinned.
func TestLoadOpenLoopStall(t *testing.T) {
	l := newLoad(t, "  - {name: n, backend: noop, timeout: 100ms, noop: {delay: 40ms}, ops: {noop: {rate: 1}}}\n")
	var c samples
	l.SetSink(c.add)
	if _, err := l.Run(context.Background(), Stage{Mix: []Weighted{{"noop", 1}}, Workers: 1, Rate: 100, Duration: 600 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.s) != 60 {
		t.Fatalf("%d samples, want one per slot: 60", len(c.s))
	}
	failed := 0
	for _, s := range c.s {
		if s.Err == nil {
			continue
		}
		failed++
		if cause := probes.CauseOf(s.Err); cause != probes.CauseBacklog && cause != probes.CauseTimeout {
			t.Errorf("cause %s, want timeout or backlog", cause)
		}
		if lat := s.End.Sub(s.Intended); lat < 100*time.Millisecond {
			t.Errorf("failed sample with latency %s, want at least the 100ms timeout", lat)
		}
	}
	if failed < 30 {
		t.Fatalf("%d of 60 failed: one worker at 40ms/op cannot keep 100 ops/s", failed)
	}
}

// RunScheduled runs the config at its own rates for the duration.
func TestRunScheduled(t *testing.T) {
	cfg, err := config.Parse([]byte("global: {instance_id: s}\ntargets:\n  - {name: a, backend: noop, ops: {noop: {rate: 50}}}\n  - {name: b, backend: noop, ops: {noop: {rate: 20}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := map[string]int{}
	err = RunScheduled(context.Background(), cfg, "s-calibrate-000000", time.Second, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), func(s Sample) {
		mu.Lock()
		n[s.Target]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if n["a"] < 40 || n["a"] > 52 || n["b"] < 15 || n["b"] > 22 {
		t.Fatalf("samples per target in 1s: %v; want about 50 and 20", n)
	}
}
