package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/probes"
)

// OpRunner runs single ops of one target synchronously through the engine's
// own per-op path (deadline context, prepare gate, probe call, histograms,
// counters, up gauge). Benchmarks use it to compare dbcanary's per-op cost
// with a bare client loop doing the same statements.
type OpRunner struct {
	r    *runner
	w    *worker
	out  probes.Outcome
	last error
}

// NewOpRunner builds the target's probe and resolves its metric series in m.
func NewOpRunner(t config.Target, instanceID string, m *metrics.Metrics, logger *slog.Logger) (*OpRunner, error) {
	r, err := newRunner(t, instanceID, false, logger)
	if err != nil {
		return nil, err
	}
	r.attachMetrics(m)
	o := &OpRunner{r: r, w: newWorker()}
	r.onReport = func(_ string, _ time.Duration, err error) { o.last = err }
	return o, nil
}

// Run executes one op now and returns its error (also recorded in the metrics).
func (o *OpRunner) Run(ctx context.Context, op string) error {
	s := o.r.byName[op]
	if s == nil || s.op.Async {
		return fmt.Errorf("op %q is not a scheduled op of target %s", op, o.r.target.Name)
	}
	o.last = nil
	o.r.execute(o.w, ctx, job{op: s, intended: time.Now()}, &o.out)
	return o.last
}

// Close closes the probe.
func (o *OpRunner) Close() error {
	o.w.timer.Stop()
	return o.r.probe.Close()
}

// Prepare runs the probe's Prepare through the engine's gate (as the first op would).
func (o *OpRunner) Prepare(ctx context.Context) error { return o.r.ensurePrepared(ctx) }
