package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/scheduler"
	"github.com/dbcanary/dbcanary/probes"
)

// Load mode drives the engine as a load generator (`dbcanary bench`) or at
// the config's own rates for a while (`dbcanary calibrate`). Every op goes
// through the daemon's own path (execute → Prepare gate → probe.Run →
// record), so every read is still verified; only who decides when an op
// starts differs. Load-mode runs are one-shot: their probes work in an
// ephemeral namespace (EphemeralInstanceID) and clean it up at Close.

// Sample is one recorded op outcome, whole.
type Sample struct {
	Target, Op string
	// Async is set for event-driven ops (a consumed message).
	Async bool
	// Intended is the op's slot (closed loop: when a worker took it), Sent
	// when its request left, End when it completed.
	Intended, Sent, End time.Time
	// Phases is valid only during the SampleFunc call.
	Phases                   []probes.Phase
	BytesSent, BytesReceived int64
	Err                      error
}

// SampleFunc receives samples on the op's goroutine: it must be quick, safe
// for concurrent use, and must copy Phases if it keeps them.
type SampleFunc func(Sample)

func discardSample(Sample) {}

// hook turns the runner's record calls into Samples for the current sink.
func hook(target string, sink func() SampleFunc, count func(s *opState, err error)) func(*opState, time.Time, time.Time, time.Time, *probes.Outcome, error) {
	return func(s *opState, intended, sent, end time.Time, out *probes.Outcome, err error) {
		if count != nil {
			count(s, err)
		}
		smp := Sample{Target: target, Op: s.op.Name, Async: s.op.Async, Intended: intended, Sent: sent, End: end, Err: err}
		if out != nil {
			smp.Phases = out.Phases()
			smp.BytesSent, smp.BytesReceived = out.BytesSent, out.BytesReceived
		}
		sink()(smp)
	}
}

// Load is one target driven by stages of load.
type Load struct {
	r    *runner
	sink atomic.Pointer[SampleFunc]
	// Event-driven samples seen and scheduled successes: an async op yields
	// one sample per scheduled success (a consumed message per confirmed
	// publish), so Drain knows when the stragglers are in.
	async, scheduledOK atomic.Int64
	hasAsync           bool
}

// NewLoad builds the target's probe in the ephemeral namespace of instance
// (see EphemeralInstanceID). t.Resolved lists the ops stages may use.
func NewLoad(t config.Target, instance string, logger *slog.Logger) (*Load, error) {
	r, err := newRunner(t, instance, true, nil, logger)
	if err != nil {
		return nil, err
	}
	l := &Load{r: r}
	l.SetSink(nil)
	for _, s := range r.ops {
		l.hasAsync = l.hasAsync || s.op.Async
	}
	r.onSample = hook(t.Name, func() SampleFunc { return *l.sink.Load() }, func(s *opState, err error) {
		if s.op.Async {
			l.async.Add(1)
		} else if err == nil {
			l.scheduledOK.Add(1)
		}
	})
	return l, nil
}

// SetSink directs samples to f from now on (nil: discard them, e.g. in a warm-up).
func (l *Load) SetSink(f SampleFunc) {
	if f == nil {
		f = discardSample
	}
	l.sink.Store(&f)
}

// Prepare runs the probe's Prepare through the engine's gate, so the first
// measured op does not pay for it.
func (l *Load) Prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.r.target.Timeout)
	defer cancel()
	return l.r.ensurePrepared(ctx)
}

// Weighted is one op of a stage's mix with its share (insert=1, read=4).
type Weighted struct {
	Op     string
	Weight int
}

// Stage is one run of load against a target.
type Stage struct {
	Mix []Weighted
	// Workers run ops concurrently. With Rate 0 each runs its next op as soon
	// as the previous one ended (closed loop, like cassandra-stress threads=8);
	// with a Rate they take ops off an open-loop schedule and latency counts
	// from each op's slot, so a stall is not hidden (opensearch-benchmark's
	// target-throughput).
	Workers int
	// Rate is the open-loop throughput of the whole mix in ops/s (0: closed loop).
	Rate float64
	// The stage ends at Duration or after MaxOps ops, whichever comes first
	// (0: no such limit; one of them must be set).
	Duration time.Duration
	MaxOps   int64
}

// StageResult is what a stage did.
type StageResult struct {
	Issued     int64
	Start, End time.Time
}

// sequence interleaves the mix's ops by weight (smooth weighted round
// robin), so any window of the run holds the ops in their ratio.
func (l *Load) sequence(mix []Weighted) ([]*opState, error) {
	var total int
	for _, w := range mix {
		s := l.r.byName[w.Op]
		switch {
		case s == nil:
			return nil, fmt.Errorf("target %s has no op %q enabled", l.r.target.Name, w.Op)
		case s.op.Async:
			return nil, fmt.Errorf("op %q is event-driven: it cannot be scheduled, its samples follow from the other ops", w.Op)
		case w.Weight < 1:
			return nil, fmt.Errorf("op %q: weight must be at least 1, got %d", w.Op, w.Weight)
		}
		total += w.Weight
	}
	if total == 0 {
		return nil, errors.New("a stage needs at least one op")
	}
	if total > 100000 {
		return nil, fmt.Errorf("op weights add up to %d: keep them small integers (1:4, 95:5)", total)
	}
	cur := make([]int, len(mix))
	seq := make([]*opState, 0, total)
	for range total {
		best := 0
		for i, w := range mix {
			cur[i] += w.Weight
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		seq = append(seq, l.r.byName[mix[best].Op])
	}
	return seq, nil
}

// Run runs one stage and returns when its last op has ended. Cancelling ctx
// stops it early; ops cut short by that are not recorded.
func (l *Load) Run(ctx context.Context, st Stage) (StageResult, error) {
	seq, err := l.sequence(st.Mix)
	if err != nil {
		return StageResult{}, err
	}
	if st.Workers < 1 {
		return StageResult{}, fmt.Errorf("a stage needs at least one worker, got %d", st.Workers)
	}
	if st.Duration <= 0 && st.MaxOps <= 0 {
		return StageResult{}, errors.New("a stage needs a duration or an op count")
	}
	if st.Rate < 0 {
		return StageResult{}, fmt.Errorf("rate must not be negative, got %g", st.Rate)
	}
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := StageResult{Start: time.Now()}
	end := res.Start.Add(st.Duration)
	if st.Duration <= 0 {
		end = res.Start.Add(100 * 365 * 24 * time.Hour)
	}
	var wg sync.WaitGroup
	if st.Rate == 0 {
		var claimed atomic.Int64
		for range st.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out probes.Outcome
				for ctx.Err() == nil {
					now := time.Now()
					if !now.Before(end) {
						return
					}
					n := claimed.Add(1)
					if st.MaxOps > 0 && n > st.MaxOps {
						return
					}
					l.r.execute(opCtx, job{op: seq[(n-1)%int64(len(seq))], intended: now}, &out)
				}
			}()
		}
		wg.Wait()
		res.Issued = claimed.Load()
		if st.MaxOps > 0 {
			res.Issued = min(res.Issued, st.MaxOps) // each worker's last claim may overshoot
		}
	} else {
		res.Issued = l.openLoop(ctx, opCtx, st, seq, res.Start, end, &wg)
		wg.Wait()
	}
	res.End = time.Now()
	return res, ctx.Err()
}

// openLoop dispatches the k-th op at start + k/rate to the workers on the
// daemon's scheduler, whatever happened to earlier ones; an op no worker
// could take within its timeout counts as a backlog failure at its timeout,
// as in the daemon.
func (l *Load) openLoop(ctx, opCtx context.Context, st Stage, seq []*opState, start, end time.Time, wg *sync.WaitGroup) int64 {
	maxTimeout := time.Duration(0)
	for _, s := range seq {
		maxTimeout = max(maxTimeout, s.op.Timeout)
	}
	jobs := make(chan job, min(max(int(st.Rate*maxTimeout.Seconds()), 16), 1<<20))
	for range st.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slot := scheduler.NewWaiter()
			defer slot.Stop()
			var out probes.Outcome
			for j := range jobs {
				// Handed over up to scheduler.Lead early: the op starts on
				// this goroutine at its slot (see runner.work).
				if slot.Until(opCtx, j.intended) && opCtx.Err() == nil {
					l.r.execute(opCtx, j, &out)
				}
			}
		}()
	}
	defer close(jobs)
	var k int64
	entry := scheduler.Entry{Rate: st.Rate, End: end.Sub(start), Runs: max(st.MaxOps, 0)}
	scheduler.RunAhead(ctx, start, []scheduler.Entry{entry}, scheduler.Lead, func(_ int, intended time.Time) {
		s := seq[k%int64(len(seq))]
		k++
		select {
		case jobs <- job{op: s, intended: intended}:
		default:
			l.r.record(s, intended, time.Now(), intended.Add(s.op.Timeout), nil, errBacklog)
		}
	})
	return k
}

// Drain waits until every event-driven sample due so far has arrived (a
// consumed message for each confirmed publish), at most timeout.
func (l *Load) Drain(ctx context.Context, timeout time.Duration) {
	if !l.hasAsync {
		return
	}
	deadline := time.Now().Add(timeout)
	for l.async.Load() < l.scheduledOK.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchNotes are the probe's sentences for a bench report about the store
// it ran against (probes.BenchNoter), nil when it has none.
func (l *Load) BenchNotes() []string {
	if n, ok := l.r.probe.(probes.BenchNoter); ok {
		return n.BenchNotes()
	}
	return nil
}

// Namespace names the probe's namespace in the store, when it can.
func (l *Load) Namespace() string {
	if n, ok := l.r.probe.(Namespacer); ok {
		return n.Namespace()
	}
	return ""
}

// Close closes the probe, which removes its ephemeral namespace; a probe
// that does not close within grace is abandoned.
func (l *Load) Close(grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- l.r.closeProbe() }()
	select {
	case err := <-done:
		return err
	case <-time.After(max(grace, time.Second)):
		return fmt.Errorf("target %s: probe did not close within %s", l.r.target.Name, grace)
	}
}

// InFlight reads the runs in flight of the target's scheduled ops, all of
// them together and each op by name (event-driven ops are not run by a
// worker and have none), up to now: see Flight. Each read starts the next
// peaks.
func (l *Load) InFlight(now time.Time) (all Flight, ops map[string]Flight) {
	ops = map[string]Flight{}
	for _, s := range l.r.ops {
		if !s.op.Async {
			ops[s.op.Name] = s.active.read(now)
		}
	}
	return l.r.active.read(now), ops
}

// RunScheduled runs every target of cfg at its configured rates, on the
// daemon's own open-loop scheduler, in the ephemeral namespace of instance,
// for d or until ctx is done; every sample goes to onSample. Then it stops
// the targets (in-flight ops get grace) and closes their probes.
func RunScheduled(ctx context.Context, cfg *config.Config, instance string, d, grace time.Duration, logger *slog.Logger, onSample SampleFunc) error {
	var runners []*runner
	for _, t := range cfg.Targets {
		r, err := newRunner(t, instance, true, nil, logger)
		if err != nil {
			for _, o := range runners {
				_ = o.closeProbe()
			}
			return err
		}
		r.onSample = hook(t.Name, func() SampleFunc { return onSample }, nil)
		runners = append(runners, r)
	}
	for _, r := range runners {
		r.start()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); r.stop(grace) }()
	}
	wg.Wait()
	return nil
}
