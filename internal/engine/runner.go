package engine

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/internal/scheduler"
	"github.com/dbcanary/dbcanary/probes"
)

// runner probes one target: a scheduler goroutine hands due ops to workers,
// at most max_in_flight, so the in-flight bound is the worker count; runs
// that find every worker busy wait on a queue. Workers start on demand and
// exit when idle (see enqueue).
type runner struct {
	target config.Target
	probe  probes.Probe
	ledger *probes.Ledger // the probe's durability ledger, nil if it keeps none; closed after the probe
	logger *slog.Logger

	ops    []*opState
	byName map[string]*opState
	jobs   chan job // runs waiting for a busy worker; guarded by poolMu

	inFlight      prometheus.Gauge
	active        flightCounter // every scheduled op's runs in flight (bench: Load.InFlight)
	up            prometheus.Gauge
	misconfigured prometheus.Gauge
	observer      Observer
	certs         certWatch

	// The target's state is derived from the latest outcome of each op and of
	// Prepare: up only if none of them failed to reach the store, so one op
	// failing for good keeps the target down instead of flapping with the others.
	stateMu   sync.Mutex
	prepState health
	upState   int32 // -1 unknown, 0 down, 1 up: for logging transitions; guarded by stateMu

	prepSem  chan struct{}
	prepared atomic.Bool
	prepMu   sync.Mutex
	prepWait probes.Backoff // Prepare's retries, 1 s doubling to 5 s; guarded by prepMu

	stopSched context.CancelFunc // stops scheduling and idle workers
	cancelOps context.CancelFunc // cancels in-flight ops (each op's context derives from it)
	wg        sync.WaitGroup

	// The worker pool. enqueue hands a run to the most recently idle worker,
	// else starts one (up to max_in_flight), else queues it on jobs; a
	// worker idle for idleFor exits. Last in, first out, so the workers a
	// burst started go idle and exit instead of sharing the steady load.
	// schedCtx and opCtx are set by start (nil: a runner never started, which
	// starts no worker).
	schedCtx, opCtx context.Context
	poolMu          sync.Mutex // also held to put a run on jobs or take one from it
	idle            []*worker  // the most recently idle last; guarded by poolMu
	live            int        // workers running; guarded by poolMu
	idleFor         time.Duration

	// onReport, when set (by `once`), sees every recorded sample.
	onReport func(op string, latency time.Duration, err error)
	// onSample, when set (load mode: bench, calibrate), sees every sample whole.
	onSample func(s *opState, intended, sent, end time.Time, out *probes.Outcome, err error)
}

type opState struct {
	op     config.Op
	obs    *metrics.OpObservers
	health health // latest outcome; guarded by runner.stateMu
	// active counts the op's runs in flight (bench reads it: Load.InFlight).
	active flightCounter
}

// health is what an op's (or Prepare's) latest outcome says of the target.
type health uint8

const (
	healthUnknown     health = iota // not run yet
	healthReached                   // succeeded, or reached the store and found bad data
	healthUnreachable               // timeout, refused, dns, tls, server, other
	healthMisconfig                 // auth or setup: a mistake to fix in config or grants
)

func healthOf(err error) health {
	if err == nil {
		return healthReached
	}
	c := probes.CauseOf(err)
	switch {
	case c == probes.CauseBacklog:
		return healthUnknown // says nothing new: the ops still running will report
	case c.DataCause(), c == probes.CauseStale:
		return healthReached // the store answered
	case c.ConfigCause():
		return healthMisconfig
	}
	return healthUnreachable
}

// workerIdle is how long a worker without a job lives on. A target keeps the
// workers its ops keep busy (one at 1 op/s), not max_in_flight goroutines
// and their stacks: 16 idle workers per target were most of the memory of a
// 1,000-target instance (docs/sizing.md). Longer than any usual op interval,
// so a steady schedule does not start a goroutine per op.
const workerIdle = 30 * time.Second

// worker is one goroutine of a runner's pool (work).
type worker struct {
	next chan job // capacity 1: a run handed to the idle worker
}

type job struct {
	op       *opState
	intended time.Time
}

var errBacklog = probes.Fail(probes.CauseBacklog, errors.New("no in-flight slot free within the op timeout (max_in_flight reached)"))

// newRunner opens the target's durability ledger, if its backend keeps one,
// from ledgers (nil: an in-memory store of its own, for one-shot runs) and
// builds the target's probe with it; metric series are resolved later by
// attachMetrics, once a replaced runner's series are gone.
func newRunner(t config.Target, instanceID string, ephemeral bool, ledgers *probes.LedgerStore, logger *slog.Logger) (*runner, error) {
	r := &runner{
		target:   t,
		logger:   logger.With("target", t.Name, "backend", t.Backend),
		byName:   map[string]*opState{},
		prepSem:  make(chan struct{}, 1),
		prepWait: probes.Backoff{Min: time.Second, Max: 5 * time.Second},
		idleFor:  workerIdle,
	}
	r.upState = -1
	b, ok := probes.Lookup(t.Backend)
	if !ok {
		return nil, fmt.Errorf("target %s: unknown backend %q", t.Name, t.Backend)
	}
	if ledgers == nil {
		ledgers = probes.NewLedgerStore("")
	}
	r.ledger = ledgers.OpenFor(t.Probe, probes.LedgerOptions{Target: t.Name, Backend: t.Backend, Instance: instanceID, Ephemeral: ephemeral, Logger: r.logger})
	p, err := b.New(probes.Target{Name: t.Name, InstanceID: instanceID, Ephemeral: ephemeral, Config: t.Probe, Logger: r.logger, Report: r, Certs: r, Ledger: r.ledger})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("target %s: %w", t.Name, err), r.closeLedger())
	}
	r.probe = p
	queue := t.MaxInFlight
	for _, op := range t.Resolved {
		s := &opState{op: op}
		r.ops = append(r.ops, s)
		r.byName[op.Name] = s
		if !op.Async {
			// Room for every run that may wait out one timeout in the queue.
			queue += int(math.Ceil(op.Rate * op.Timeout.Seconds()))
		}
	}
	r.jobs = make(chan job, min(max(queue, 16), 100000))
	return r, nil
}

// attachMetrics resolves the runner's series; done after the replaced runner's
// series were deleted, so a restarted target starts from clean series.
func (r *runner) attachMetrics(m *metrics.Metrics) {
	var scheduled float64
	for _, s := range r.ops {
		if !s.op.Async {
			scheduled += s.op.Rate
		}
	}
	for _, s := range r.ops {
		s.obs = m.ForOp(r.target.Name, r.target.Backend, s.op.Name, s.op.Phases)
		// An event-driven op (a consumed message) expects one sample per
		// scheduled op of its target (each publish).
		rate := s.op.Rate
		if s.op.Async {
			rate = scheduled
		}
		m.ExpectedRate.WithLabelValues(r.target.Name, r.target.Backend, s.op.Name).Set(rate)
	}
	r.inFlight = m.InFlight.WithLabelValues(r.target.Name, r.target.Backend)
	r.up = m.Up.WithLabelValues(r.target.Name, r.target.Backend)
	r.misconfigured = m.Misconfigured.WithLabelValues(r.target.Name, r.target.Backend)
	r.certs.attach(func() prometheus.Gauge { return m.CertExpiry.WithLabelValues(r.target.Name, r.target.Backend) })
	r.up.Set(0)
	r.misconfigured.Set(0)
}

// start launches the scheduler, the workers and an eager Prepare.
func (r *runner) start() {
	schedCtx, stopSched := context.WithCancel(context.Background())
	opCtx, cancelOps := context.WithCancel(context.Background())
	r.stopSched, r.cancelOps = stopSched, cancelOps
	r.schedCtx, r.opCtx = schedCtx, opCtx

	var entries []scheduler.Entry
	var scheduled []*opState
	for _, s := range r.ops {
		if s.op.Async {
			continue
		}
		iv := scheduler.IntervalOf(s.op.Rate)
		entries = append(entries, scheduler.Entry{Interval: iv, Offset: scheduler.RandomOffset(iv)})
		scheduled = append(scheduled, s)
	}
	r.wg.Add(2) // the scheduler and Prepare; enqueue adds the workers
	go func() {
		defer r.wg.Done()
		// Each run is handed to a worker up to scheduler.Lead before its
		// slot; the worker waits for the slot itself (see work).
		scheduler.RunAhead(schedCtx, time.Now(), entries, scheduler.Lead, func(i int, intended time.Time) {
			r.enqueue(job{op: scheduled[i], intended: intended})
		})
	}()
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(opCtx, r.target.Timeout)
		defer cancel()
		if err := r.ensurePrepared(ctx); err != nil && opCtx.Err() == nil {
			r.setPrepared(err)
		}
	}()
}

// stop ends scheduling, lets in-flight ops finish for up to grace, cancels
// the rest, then closes the probe.
func (r *runner) stop(grace time.Duration) {
	r.stopSched()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		r.cancelOps()
		<-done
	}
	r.cancelOps()
	// A client library stuck in its own reconnect loop must not hang shutdown
	// or a reload: Close gets the grace period too, then is abandoned.
	closed := make(chan error, 1)
	go func() { closed <- r.probe.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			r.logger.Warn("closing probe", "err", err)
		}
	case <-time.After(max(grace, time.Second)):
		r.logger.Warn("probe did not close within the grace period; abandoned", "grace", grace)
	}
	if err := r.closeLedger(); err != nil {
		r.logger.Warn("durability ledger: cannot save the file", "err", err)
	}
}

// closeProbe closes the probe, then its ledger (a one-shot probe's Close
// reads the ledger to delete what it wrote).
func (r *runner) closeProbe() error {
	err := r.probe.Close()
	return errors.Join(err, r.closeLedger())
}

func (r *runner) closeLedger() error {
	if r.ledger == nil {
		return nil
	}
	return r.ledger.Close()
}

// enqueue hands a due run to an idle worker, or starts a worker for it, or
// queues it. Only the scheduler goroutine calls it (so wg.Add runs while wg
// counts that goroutine).
func (r *runner) enqueue(j job) {
	r.poolMu.Lock()
	if n := len(r.idle); n > 0 {
		w := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.poolMu.Unlock()
		w.next <- j // an idle worker's slot is empty
		return
	}
	if r.schedCtx != nil && r.live < r.target.MaxInFlight {
		r.live++
		r.poolMu.Unlock()
		w := &worker{next: make(chan job, 1)}
		w.next <- j
		r.wg.Add(1)
		go r.work(w)
		return
	}
	select {
	case r.jobs <- j:
		r.poolMu.Unlock()
		return
	default:
	}
	r.poolMu.Unlock()
	// The queue holds every run that can start within one timeout, so this
	// one could not have: it counts at its timeout, like an op that timed
	// out, not at the ~0 s it took to refuse it.
	now := time.Now()
	r.record(j.op, j.intended, now, j.intended.Add(j.op.op.Timeout), nil, errBacklog)
}

// work runs w's run, then queued runs, then waits idle for the next one
// until scheduling stops or idleFor passes without one.
func (r *runner) work(w *worker) {
	defer r.wg.Done()
	// The op starts on this goroutine at its slot: no hand-off after the
	// wake-up, and a wake-up within tens of µs instead of the Go timer's
	// 0..1 ms (scheduler.Waiter).
	slot := scheduler.NewWaiter()
	defer slot.Stop()
	idle := time.NewTimer(r.idleFor)
	defer idle.Stop()
	var out probes.Outcome
	j := <-w.next
	for {
		if !slot.Until(r.schedCtx, j.intended) {
			r.leave(w)
			return
		}
		r.execute(r.opCtx, j, &out)
		r.poolMu.Lock()
		select {
		case j = <-r.jobs:
			r.poolMu.Unlock()
			continue
		default:
		}
		r.idle = append(r.idle, w)
		r.poolMu.Unlock()
		idle.Reset(r.idleFor)
		select {
		case j = <-w.next:
		case <-r.schedCtx.Done():
			r.leave(w)
			return
		case <-idle.C:
			if r.retire(w) {
				return
			}
			j = <-w.next // handed a run as it was about to retire
		}
	}
}

// retire takes idle worker w out of the pool, unless a run was just handed
// to it (it is no longer among the idle).
func (r *runner) retire(w *worker) bool {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	i := slices.Index(r.idle, w)
	if i < 0 {
		return false
	}
	r.idle = slices.Delete(r.idle, i, i+1)
	r.live--
	return true
}

// leave takes w out of the pool as scheduling stops.
func (r *runner) leave(w *worker) {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if i := slices.Index(r.idle, w); i >= 0 {
		r.idle = slices.Delete(r.idle, i, i+1)
	}
	r.live--
}

// execute runs one op. Latency counts from the intended start, service time
// from when the request was sent.
func (r *runner) execute(ctx context.Context, j job, out *probes.Outcome) {
	start := time.Now()
	deadline := j.intended.Add(j.op.op.Timeout)
	if !start.Before(deadline) {
		r.record(j.op, j.intended, start, start, nil, errBacklog)
		return
	}
	if r.inFlight != nil {
		r.inFlight.Inc()
		defer r.inFlight.Dec()
	}
	j.op.active.add(start, 1)
	r.active.add(start, 1)
	defer func() {
		end := time.Now()
		j.op.active.add(end, -1)
		r.active.add(end, -1)
	}()
	// The deadline counts from the intended start, like latency: an op that
	// waited for a slot has less time left, so no latency exceeds the timeout
	// by more than the scheduling slack.
	octx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	out.Reset(j.intended)
	err := r.ensurePrepared(octx)
	if err == nil {
		err = r.probe.Run(octx, j.op.op.Name, out)
	}
	end := time.Now()
	if ctx.Err() != nil {
		return // shutting down: a cancelled op says nothing about the store
	}
	if err != nil {
		if errors.Is(err, probes.ErrNamespaceGone) {
			r.prepared.Store(false)
		}
		if octx.Err() == context.DeadlineExceeded && !probes.CauseOf(err).DataCause() {
			err = probes.Fail(probes.CauseTimeout, fmt.Errorf("op timed out after %s: %w", j.op.op.Timeout, err))
		}
	}
	sent := out.Sent
	if sent.IsZero() || sent.Before(start) {
		sent = start
	}
	r.record(j.op, j.intended, sent, end, out, err)
}

// ensurePrepared runs Prepare once, or again after a failure once the
// backoff (1 s doubling to 5 s) has passed; meanwhile ops fail fast with the
// last Prepare error so a down store costs nothing but a counter.
func (r *runner) ensurePrepared(ctx context.Context) error {
	if r.prepared.Load() {
		return nil
	}
	select {
	case r.prepSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.prepSem }()
	if r.prepared.Load() {
		return nil
	}
	r.prepMu.Lock()
	if err := r.prepWait.Wait(time.Now()); err != nil {
		r.prepMu.Unlock()
		return err
	}
	r.prepMu.Unlock()

	err := r.probe.Prepare(ctx)

	r.prepMu.Lock()
	defer r.prepMu.Unlock()
	if err != nil {
		last := r.prepWait.Err()
		retryIn := r.prepWait.Fail(time.Now(), err)
		if last == nil || last.Error() != err.Error() {
			r.logger.Warn("cannot prepare the canary namespace; retrying with backoff", "err", err, "retry_in", retryIn)
		}
		return err
	}
	if r.prepWait.Err() != nil {
		r.logger.Info("canary namespace ready")
	}
	r.prepWait.Succeed()
	r.prepared.Store(true)
	r.setPrepared(nil)
	return nil
}

// CertsSeen implements probes.CertObserver: the earliest expiry of the
// certificates the store presented, for the gauge and the status page.
func (r *runner) CertsSeen(chain []*x509.Certificate) {
	notAfter, subject := r.certs.observe(chain, time.Now())
	if o, ok := r.observer.(CertObserver); ok {
		o.CertExpiry(r.target.Name, notAfter, subject)
	}
}

// Report implements probes.Reporter for async ops.
func (r *runner) Report(op string, intended, sent, done time.Time, out *probes.Outcome, err error) {
	s, ok := r.byName[op]
	if !ok {
		return // op not enabled in this target's config
	}
	if sent.IsZero() {
		sent = intended
	}
	r.record(s, intended, sent, done, out, err)
}

func (r *runner) record(s *opState, intended, sent, end time.Time, out *probes.Outcome, err error) {
	latency := end.Sub(intended)
	if r.onReport != nil {
		r.onReport(s.op.Name, latency, err)
	}
	if r.onSample != nil {
		r.onSample(s, intended, sent, end, out, err)
	}
	o := s.obs
	if o == nil {
		return
	}
	var cause probes.Cause
	if err == nil {
		o.LatencyOK.Observe(latency.Seconds())
		o.ServiceOK.Observe(end.Sub(sent).Seconds())
		o.LastSuccess.Set(float64(end.UnixNano()) / 1e9)
		if out != nil {
			for _, ph := range out.Phases() {
				if h, ok := o.Phases[ph.Name]; ok {
					h.Observe(ph.Duration.Seconds())
				}
			}
		}
	} else {
		cause = probes.CauseOf(err)
		o.LatencyErr.Observe(latency.Seconds())
		if cause != probes.CauseBacklog {
			o.ServiceErr.Observe(end.Sub(sent).Seconds())
		}
		o.Failure(cause).Inc()
		if r.logger.Enabled(context.Background(), slog.LevelDebug) {
			r.logger.Debug("op failed", "op", s.op.Name, "cause", cause, "err", err)
		}
		if cause.DataCause() {
			r.logger.Warn("data integrity failure", "op", s.op.Name, "cause", cause, "err", err)
		}
	}
	if h := healthOf(err); h != healthUnknown {
		r.setHealth(s, h, err)
	}
	if out != nil {
		if out.BytesSent > 0 {
			o.BytesSent.Add(float64(out.BytesSent))
		}
		if out.BytesReceived > 0 {
			o.BytesReceived.Add(float64(out.BytesReceived))
		}
	}
	if r.observer != nil {
		r.observer.OpRecorded(r.target.Name, r.target.Backend, s.op.Name, end, latency, cause, err)
	}
}

// setPrepared records the outcome of Prepare (nil: the namespace is ready).
func (r *runner) setPrepared(err error) {
	h := healthOf(err)
	if h == healthUnknown {
		h = healthUnreachable
	}
	r.setHealth(nil, h, err)
}

// setHealth records the latest outcome of op s (nil: of Prepare) and
// re-derives the target's up and misconfigured gauges from all of them.
func (r *runner) setHealth(s *opState, h health, err error) {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	if s == nil {
		r.prepState = h
	} else {
		s.health = h
	}
	up, misconfig := r.prepState == healthReached, r.prepState == healthMisconfig
	for _, o := range r.ops {
		switch o.health {
		case healthUnreachable:
			up = false
		case healthMisconfig:
			up, misconfig = false, true
		}
	}
	if r.up != nil {
		r.up.Set(b2f(up))
		r.misconfigured.Set(b2f(misconfig))
	}
	v := int32(0)
	if up {
		v = 1
	}
	if old := r.upState; old != v {
		r.upState = v
		switch {
		case up && old == 0:
			r.logger.Info("target is up again")
		case !up:
			r.logger.Warn("target is down", "cause", probes.CauseOf(err), "misconfigured", misconfig, "err", err)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
