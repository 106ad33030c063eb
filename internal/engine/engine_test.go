package engine_test

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/noop"
)

// stallProbe is a fake backend for scheduler tests: ops return at once
// unless the test freezes it (every op waits until the freeze ends, like a
// stalled server) or slows it (each op takes a fixed time, like a latency fault).
type stallProbe struct{}

type stallState struct {
	mu          sync.Mutex
	frozenUntil time.Time
	slowUntil   time.Time
	slowBy      time.Duration
	inFlight    atomic.Int32
	maxInFlight atomic.Int32
}

var stall = &stallState{}

type stallConfig struct{}

func (*stallConfig) Validate() []error { return nil }
func (*stallConfig) Ops() []probes.OpSpec {
	return []probes.OpSpec{{Name: "op", DefaultRate: 10}}
}

func init() {
	probes.Register(probes.Backend{
		Name:      "stalltest",
		NewConfig: func() probes.Config { return &stallConfig{} },
		New:       func(probes.Target) (probes.Probe, error) { return stallProbe{}, nil },
	})
}

func (stallProbe) Prepare(context.Context) error { return nil }
func (stallProbe) Close() error                  { return nil }
func (stallProbe) Run(ctx context.Context, _ string, _ *probes.Outcome) error {
	n := stall.inFlight.Add(1)
	defer stall.inFlight.Add(-1)
	for {
		m := stall.maxInFlight.Load()
		if n <= m || stall.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	stall.mu.Lock()
	now := time.Now()
	wait := time.Duration(0)
	if now.Before(stall.frozenUntil) {
		wait = stall.frozenUntil.Sub(now)
	} else if now.Before(stall.slowUntil) {
		wait = stall.slowBy
	}
	stall.mu.Unlock()
	if wait == 0 {
		return nil
	}
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// latencies returns the latency samples above min, from the histogram's
// classic buckets: counts per bucket bound.
func slowCount(t *testing.T, h *enginetest.Harness, min float64) uint64 {
	t.Helper()
	ms := h.Find(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "s", "result": "ok"})
	if len(ms) != 1 {
		t.Fatalf("want one ok latency series, got %d", len(ms))
	}
	hist := ms[0].GetHistogram()
	below := uint64(0)
	for _, b := range hist.GetBucket() {
		if b.GetUpperBound() < min {
			below = b.GetCumulativeCount()
		}
	}
	return hist.GetSampleCount() - below
}

const stallConfigYAML = `
global: {instance_id: t}
targets:
  - name: s
    backend: stalltest
    timeout: 10s
    max_in_flight: 64
    ops:
      op: {rate: 10}
`

// TestStallYieldsOneSlowSamplePerMissedSlot is the coordinated-omission test:
// a backend frozen for 2 s at 10 ops/s must show ~20 slow samples (one per
// slot that fell in the stall), not the single slow sample a closed-loop
// tool would record.
func TestStallYieldsOneSlowSamplePerMissedSlot(t *testing.T) {
	h := enginetest.Start(t, stallConfigYAML)
	time.Sleep(1 * time.Second)
	stall.mu.Lock()
	stall.frozenUntil = time.Now().Add(2 * time.Second)
	stall.mu.Unlock()
	time.Sleep(3 * time.Second)

	slow := slowCount(t, h, 0.1) // every slot in the stall waited >= 100 ms
	t.Logf("samples >= 100ms: %d, total: %d", slow, h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"result": "ok"}))
	if slow < 18 || slow > 22 {
		t.Errorf("a 2 s stall at 10 ops/s gave %d samples >= 100 ms, want ~20", slow)
	}
	// Service time counts from when each op was sent, which during the freeze
	// was on schedule: it matches latency here because nothing queued before sending.
	if n := h.HistogramCount(t, "dbcanary_op_service_time_seconds", enginetest.L{"result": "ok"}); n == 0 {
		t.Error("no service time samples")
	}
}

// TestSlowWindowEveryOpCounts: with each op taking 2 s for a 2 s window (a
// latency fault), every slot in the window yields a sample >= 1 s.
func TestSlowWindowEveryOpCounts(t *testing.T) {
	h := enginetest.Start(t, stallConfigYAML)
	time.Sleep(500 * time.Millisecond)
	stall.mu.Lock()
	stall.slowUntil, stall.slowBy = time.Now().Add(2*time.Second), 2*time.Second
	stall.mu.Unlock()
	time.Sleep(4500 * time.Millisecond)
	if slow := slowCount(t, h, 1); slow < 19 {
		t.Errorf("got %d samples >= 1 s, want >= 19", slow)
	}
}

// TestBacklogAndInFlightBound: with two slots and ops slower than the
// schedule, excess runs fail (timeout once their deadline, counted from the
// intended start, has passed; backlog when they could not even start),
// concurrency never exceeds the bound, and no sample's latency exceeds the
// timeout by more than scheduling slack: before the deadline counted from the
// intended start, an op that started late could run a whole timeout more.
func TestBacklogAndInFlightBound(t *testing.T) {
	stall.maxInFlight.Store(0)
	stall.mu.Lock()
	stall.slowUntil, stall.slowBy = time.Now().Add(time.Hour), 250*time.Millisecond
	stall.mu.Unlock()
	defer func() {
		stall.mu.Lock()
		stall.slowUntil = time.Time{}
		stall.mu.Unlock()
	}()
	h := enginetest.Start(t, `
global: {instance_id: t}
targets:
  - name: s
    backend: stalltest
    timeout: 300ms
    max_in_flight: 2
    ops:
      op: {rate: 40}
`)
	enginetest.WaitFor(t, 10*time.Second, "failures", func() bool {
		return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"cause": "backlog"})+
			h.Value(t, "dbcanary_op_failures_total", enginetest.L{"cause": "timeout"}) >= 20
	})
	if m := stall.maxInFlight.Load(); m > 2 {
		t.Errorf("max concurrent ops = %d, bound is 2", m)
	}
	if up := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "s"}); up != 0 {
		t.Errorf("ops timing out must mark the target down, up = %v", up)
	}
	if n := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"result": "error"}); n == 0 {
		t.Error("failures must record their latency")
	}
	for _, res := range []string{"ok", "error"} {
		ms := h.Find(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "s", "result": res})
		hist := ms[0].GetHistogram()
		var upTo05 uint64
		for _, b := range hist.GetBucket() {
			if b.GetUpperBound() == 0.5 {
				upTo05 = b.GetCumulativeCount()
			}
		}
		if over := hist.GetSampleCount() - upTo05; over > 0 {
			t.Errorf("%d %s samples took over 0.5 s with a 300 ms timeout: the deadline must count from the intended start", over, res)
		}
	}
}

func TestFailureCauseAndUp(t *testing.T) {
	h := enginetest.Start(t, `
global: {instance_id: t}
targets:
  - name: bad
    backend: noop
    ops: {noop: {rate: 20}}
    noop: {failure_ratio: 1, failure_cause: auth}
  - name: corrupt
    backend: noop
    ops: {noop: {rate: 20}}
    noop: {failure_ratio: 1, failure_cause: mismatch}
`)
	enginetest.WaitFor(t, 5*time.Second, "failures", func() bool {
		return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "bad", "cause": "auth"}) >= 3 &&
			h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "corrupt", "cause": "mismatch"}) >= 3
	})
	if up := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "bad"}); up != 0 {
		t.Errorf("auth failures: up = %v, want 0", up)
	}
	// A mismatch means the store answered: up, but integrity failed.
	if up := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "corrupt"}); up != 1 {
		t.Errorf("mismatch failures: up = %v, want 1", up)
	}
	// The causes an alert selects by name exist from the start (increase()
	// sees their first failure); the others appear on first use.
	for _, c := range metrics.EagerCauses {
		if len(h.Find(t, "dbcanary_op_failures_total", enginetest.L{"target": "bad", "cause": string(c)})) != 1 {
			t.Errorf("no %s series before the first %s failure", c, c)
		}
	}
	if n := len(h.Find(t, "dbcanary_op_failures_total", enginetest.L{"target": "bad"})); n != len(metrics.EagerCauses)+1 {
		t.Errorf("failure series = %d, want the eager causes (%d) and auth", n, len(metrics.EagerCauses))
	}
}

func TestReloadKeepsUnchangedAndRemovesGone(t *testing.T) {
	h := enginetest.Start(t, `
global: {instance_id: t}
targets:
  - {name: keep, backend: noop, ops: {noop: {rate: 50}}}
  - {name: gone, backend: noop, ops: {noop: {rate: 50}}}
`)
	enginetest.WaitFor(t, 5*time.Second, "samples", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "gone"}) > 5 &&
			h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "keep"}) > 5
	})
	before := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "keep"})
	cfg := enginetest.Parse(t, `
global: {instance_id: t}
targets:
  - {name: keep, backend: noop, ops: {noop: {rate: 50}}}
  - {name: new, backend: noop, ops: {noop: {rate: 50}}}
`)
	if err := h.Engine.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if n := len(h.Find(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "gone"})) +
		len(h.Find(t, "dbcanary_op_failures_total", enginetest.L{"target": "gone"})) +
		len(h.Find(t, "dbcanary_target_up", enginetest.L{"target": "gone"})); n != 0 {
		t.Errorf("removed target still has %d series", n)
	}
	if after := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "keep"}); after < before {
		t.Errorf("unchanged target was restarted: count %d -> %d", before, after)
	}
	enginetest.WaitFor(t, 5*time.Second, "new target samples", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"target": "new"}) > 0
	})
	var names []string
	for _, m := range h.Find(t, "dbcanary_target_info", nil) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "target" {
				names = append(names, l.GetValue())
			}
		}
	}
	sort.Strings(names)
	if len(names) != 2 || names[0] != "keep" || names[1] != "new" {
		t.Errorf("target_info targets = %v", names)
	}
}

// TestPrepareFailureBacksOff: a probe whose namespace cannot be prepared is
// down, its ops fail fast with the prepare error's cause, and Prepare is
// retried with backoff rather than on every op.
func TestPrepareFailureBacksOff(t *testing.T) {
	prepares.Store(0)
	h := enginetest.Start(t, `
global: {instance_id: t}
targets:
  - {name: p, backend: preparefail, ops: {op: {rate: 50}}}
`)
	time.Sleep(2500 * time.Millisecond)
	fails := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"cause": "refused"})
	if fails < 50 {
		t.Errorf("ops during prepare failure: %v refused, want most of ~125", fails)
	}
	if n := prepares.Load(); n > 4 {
		t.Errorf("Prepare called %d times in 2.5 s; backoff should allow at most ~3", n)
	}
	if up := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "p"}); up != 0 {
		t.Errorf("up = %v", up)
	}
}

var prepares atomic.Int32

type prepareFail struct{}

func (prepareFail) Prepare(context.Context) error {
	prepares.Add(1)
	return probes.Fail(probes.CauseRefused, context.DeadlineExceeded)
}
func (prepareFail) Run(context.Context, string, *probes.Outcome) error { return nil }
func (prepareFail) Close() error                                       { return nil }

func init() {
	probes.Register(probes.Backend{
		Name:      "preparefail",
		NewConfig: func() probes.Config { return &stallConfig{} },
		New:       func(probes.Target) (probes.Probe, error) { return prepareFail{}, nil },
	})
}

// TestStopIsBoundedByGrace: ops stuck in a store that never answers are
// cancelled once the grace period is over, so shutdown and reload stay bounded.
func TestStopIsBoundedByGrace(t *testing.T) {
	h := enginetest.Start(t, `
global: {instance_id: t}
targets:
  - {name: hung, backend: noop, timeout: 1m, ops: {noop: {rate: 20}}, noop: {delay: 1h}}
`)
	enginetest.WaitFor(t, 5*time.Second, "ops in flight", func() bool {
		return h.Value(t, "dbcanary_op_in_flight", enginetest.L{"target": "hung"}) >= 5
	})
	start := time.Now()
	h.Engine.Stop() // the harness uses a 2 s grace period
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %s with a 2 s grace period", d)
	}
	// Cancelled ops say nothing about the store: no failure is recorded for them.
	if f := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "hung"}); f != 0 {
		t.Errorf("%v failures recorded for ops cancelled by shutdown", f)
	}
}
