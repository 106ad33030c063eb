package engine

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/noop"
)

func parse(t *testing.T, y string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestBacklogLatencyIsTheTimeout: a run refused because the queue is full
// counts at its timeout, not at the ~0 s it took to refuse it.
func TestBacklogLatencyIsTheTimeout(t *testing.T) {
	cfg := parse(t, `
global: {instance_id: t}
targets:
  - {name: s, backend: noop, timeout: 2s, ops: {noop: {rate: 1}}}
`)
	r, err := newRunner(cfg.Targets[0], "t", false, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.probe.Close() }()
	r.jobs = make(chan job) // full: nobody receives
	var got time.Duration
	var gotErr error
	r.onReport = func(_ string, lat time.Duration, err error) { got, gotErr = lat, err }
	r.enqueue(job{op: r.ops[0], intended: time.Now()})
	if probes.CauseOf(gotErr) != probes.CauseBacklog {
		t.Fatalf("cause = %q, want backlog", probes.CauseOf(gotErr))
	}
	if got != 2*time.Second {
		t.Errorf("backlog latency = %s, want the 2s timeout", got)
	}
}

// TestDeadlineCountsFromIntendedStart: an op that starts late gets what is
// left of its timeout, so its latency cannot reach twice the timeout.
func TestDeadlineCountsFromIntendedStart(t *testing.T) {
	cfg := parse(t, `
global: {instance_id: t}
targets:
  - {name: s, backend: noop, timeout: 1s, ops: {noop: {rate: 1}}}
`)
	r, err := newRunner(cfg.Targets[0], "t", false, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	r.probe = deadlineProbe{got: make(chan time.Time, 1)}
	r.prepared.Store(true)
	intended := time.Now().Add(-400 * time.Millisecond)
	var out probes.Outcome
	r.execute(context.Background(), job{op: r.ops[0], intended: intended}, &out)
	dl := <-r.probe.(deadlineProbe).got
	if want := intended.Add(time.Second); !dl.Equal(want) {
		t.Errorf("op deadline = intended + %s, want intended + 1s", dl.Sub(intended))
	}
}

type deadlineProbe struct{ got chan time.Time }

func (deadlineProbe) Prepare(context.Context) error { return nil }
func (deadlineProbe) Close() error                  { return nil }
func (p deadlineProbe) Run(ctx context.Context, _ string, _ *probes.Outcome) error {
	dl, _ := ctx.Deadline()
	p.got <- dl
	return nil
}

// TestTargetUpFollowsEveryOp: one op failing for good keeps the target down
// while another op succeeds, instead of flapping with whichever ran last; a
// setup failure marks it misconfigured.
func TestTargetUpFollowsEveryOp(t *testing.T) {
	cfg := parse(t, `
global: {instance_id: t}
targets:
  - {name: s, backend: noop, ops: {noop: {rate: 1}}}
`)
	r, err := newRunner(cfg.Targets[0], "t", false, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.probe.Close() }()
	// A second op beside noop's own.
	other := &opState{op: config.Op{Name: "other", Rate: 1, Timeout: time.Second}}
	r.ops = append(r.ops, other)
	r.byName["other"] = other
	m := metrics.NewWith(prometheus.NewRegistry(), metrics.Options{})
	r.attachMetrics(m)
	gauge := func(g prometheus.Gauge) float64 {
		ch := make(chan prometheus.Metric, 1)
		g.Collect(ch)
		var d dto.Metric
		_ = (<-ch).Write(&d)
		return d.GetGauge().GetValue()
	}
	now := time.Now()
	r.setPrepared(nil)
	if gauge(r.up) != 1 {
		t.Fatal("prepared target with no failures must be up")
	}
	for range 3 {
		r.record(r.ops[0], now, now, now, nil, nil)
		r.record(other, now, now, now, nil, probes.Fail(probes.CauseRefused, io.EOF))
		if gauge(r.up) != 0 {
			t.Fatal("an op failing for good must keep the target down after another op succeeds")
		}
	}
	if gauge(r.misconfigured) != 0 {
		t.Error("refused is not a setup mistake")
	}
	r.record(other, now, now, now, nil, probes.Fail(probes.CauseSetup, io.EOF))
	if gauge(r.up) != 0 || gauge(r.misconfigured) != 1 {
		t.Error("a setup failure: want up 0, misconfigured 1")
	}
	r.record(other, now, now, now, nil, probes.Fail(probes.CauseMismatch, io.EOF))
	if gauge(r.up) != 1 || gauge(r.misconfigured) != 0 {
		t.Error("a mismatch reached the store: want up 1, misconfigured 0")
	}
	// A stale read under weak consistency: the store answered.
	r.record(other, now, now, now, nil, probes.Fail(probes.CauseStale, io.EOF))
	if gauge(r.up) != 1 {
		t.Error("a stale read reached the store: want up 1")
	}
	// Backlog says nothing new about the store.
	r.record(other, now, now, now, nil, errBacklog)
	if gauge(r.up) != 1 {
		t.Error("backlog must not change the target's state")
	}
}

// TestReloadDoesNotStallScrape: while a reload waits for a removed target's
// probe to close, gathering the registry (dbcanary_target_info included)
// returns at once.
func TestReloadDoesNotStallScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := New(metrics.NewWith(reg, metrics.Options{}), reg, discard, 10*time.Second)
	release := make(chan struct{})
	closing := make(chan struct{})
	blockClose.Store(&blockState{release: release, closing: closing})
	if err := e.Apply(parse(t, `
global: {instance_id: t}
targets:
  - {name: slow, backend: blockclose, ops: {op: {rate: 1}}}
`)); err != nil {
		t.Fatal(err)
	}
	applied := make(chan error, 1)
	go func() {
		applied <- e.Apply(parse(t, `
global: {instance_id: t}
targets:
  - {name: other, backend: noop, ops: {noop: {rate: 1}}}
`))
	}()
	<-closing // the reload is now inside Apply, waiting for Close
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-applied:
		t.Fatalf("reload finished before Close was released: %v", err)
	default:
	}
	close(release)
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	e.Stop()
}

var blockClose atomic.Pointer[blockState]

type blockState struct{ release, closing chan struct{} }

type blockConfig struct{}

func (*blockConfig) Validate() []error { return nil }
func (*blockConfig) Ops() []probes.OpSpec {
	return []probes.OpSpec{{Name: "op", DefaultRate: 1}}
}

type blockProbe struct{}

func (blockProbe) Prepare(context.Context) error                      { return nil }
func (blockProbe) Run(context.Context, string, *probes.Outcome) error { return nil }
func (blockProbe) Close() error {
	s := blockClose.Load()
	close(s.closing)
	<-s.release
	return nil
}

func init() {
	probes.Register(probes.Backend{
		Name:      "blockclose",
		NewConfig: func() probes.Config { return &blockConfig{} },
		New:       func(probes.Target) (probes.Probe, error) { return blockProbe{}, nil },
	})
}

// gateProbe's ops block while the gate is closed, counting the most ever
// running at once.
type gateProbe struct {
	mu      sync.Mutex
	open    chan struct{}
	running int
	most    int
}

func (*gateProbe) Prepare(context.Context) error { return nil }
func (*gateProbe) Close() error                  { return nil }
func (p *gateProbe) Run(ctx context.Context, _ string, _ *probes.Outcome) error {
	p.mu.Lock()
	p.running++
	p.most = max(p.most, p.running)
	open := p.open
	p.mu.Unlock()
	defer func() { p.mu.Lock(); p.running--; p.mu.Unlock() }()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *gateProbe) peak() int { p.mu.Lock(); defer p.mu.Unlock(); return p.most }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWorkersFollowLoad: a target starts workers as its ops need them, never
// more than max_in_flight, and they exit once idle: a fast op keeps one or
// two, not max_in_flight idle goroutines (docs/sizing.md, 1,000 targets).
func TestWorkersFollowLoad(t *testing.T) {
	cfg := parse(t, `
global: {instance_id: t}
targets:
  - {name: s, backend: noop, timeout: 10s, max_in_flight: 4, ops: {noop: {rate: 50}}}
`)
	r, err := newRunner(cfg.Targets[0], "t", false, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	gate := &gateProbe{open: make(chan struct{})}
	r.probe = gate
	r.prepared.Store(true)
	r.idleFor = 100 * time.Millisecond
	var done atomic.Int64
	r.onReport = func(string, time.Duration, error) { done.Add(1) }
	r.start()
	stopped := false
	defer func() {
		if !stopped {
			r.stop(time.Second)
		}
	}()

	// Stalled: the pool grows to the bound and no further.
	waitFor(t, "4 ops in flight", func() bool { return gate.peak() == 4 })
	if n := r.workers(); n != 4 {
		t.Errorf("stalled: %d workers, want max_in_flight (4)", n)
	}
	close(gate.open)
	gate.mu.Lock()
	gate.open = make(chan struct{})
	close(gate.open) // from now on ops return at once
	gate.mu.Unlock()
	n0 := done.Load()
	waitFor(t, "50 more ops", func() bool { return done.Load() >= n0+50 })
	if p := gate.peak(); p > 4 {
		t.Errorf("%d ops ran at once, max_in_flight is 4", p)
	}
	// Fast ops at 50/s: the idle workers exit, one (or two, on a loaded
	// machine) remains.
	waitFor(t, "idle workers to exit", func() bool { return r.workers() <= 2 })
	r.stop(time.Second)
	stopped = true
	if n := r.workers(); n != 0 {
		t.Errorf("%d workers after stop", n)
	}
}

// workers is how many workers run now.
func (r *runner) workers() int {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	return r.live
}
