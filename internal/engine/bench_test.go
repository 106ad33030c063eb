package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/noop"
)

func benchRunner(b *testing.B) *runner {
	cfg, err := config.Parse([]byte("global: {instance_id: b}\ntargets:\n  - {name: n, backend: noop, max_in_flight: 4, ops: {noop: {rate: 1}}}\n"))
	if err != nil {
		b.Fatal(err)
	}
	m := metrics.NewWith(prometheus.NewRegistry(), metrics.Options{})
	r, err := newRunner(cfg.Targets[0], "b", false, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	r.attachMetrics(m)
	return r
}

// BenchmarkExecute is the engine's per-op cost with the noop probe: deadline
// context, prepare check, probe call, latency + service histograms (native and
// classic), last-success gauge, up gauge. One goroutine, so ops/s is per core.
func BenchmarkExecute(b *testing.B) {
	r := benchRunner(b)
	ctx := context.Background()
	var out noopOutcome
	j := job{op: r.ops[0]}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		j.intended = time.Now()
		r.execute(ctx, j, &out.o)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s/core")
}

// BenchmarkExecuteDerived is BenchmarkExecute with a probe that derives a
// context from the op's, as client libraries do per request (gocql per
// query): what the op context costs a real probe.
func BenchmarkExecuteDerived(b *testing.B) {
	r := benchRunner(b)
	r.probe = derivingProbe{r.probe}
	ctx := context.Background()
	var out noopOutcome
	j := job{op: r.ops[0]}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		j.intended = time.Now()
		r.execute(ctx, j, &out.o)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s/core")
}

type derivingProbe struct{ probes.Probe }

func (p derivingProbe) Run(ctx context.Context, op string, out *probes.Outcome) error {
	c, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	return p.Probe.Run(c, op, out)
}

// BenchmarkDispatch adds the queue hand-off to a worker: what the scheduler
// pays per due run, through to the recorded sample.
func BenchmarkDispatch(b *testing.B) {
	r := benchRunner(b)
	done := make(chan struct{}, 1024)
	schedCtx, stop := context.WithCancel(context.Background())
	defer func() { stop(); r.wg.Wait() }()
	r.schedCtx, r.opCtx = schedCtx, context.Background()
	// At most max_in_flight runs outstanding: measure hand-off, not backlog.
	slots := make(chan struct{}, r.target.MaxInFlight)
	r.onReport = func(string, time.Duration, error) { <-slots; done <- struct{}{} }
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() { // one goroutine, as the scheduler
		for i := 0; i < b.N; i++ {
			slots <- struct{}{}
			r.enqueue(job{op: r.ops[0], intended: time.Now()})
		}
	}()
	for i := 0; i < b.N; i++ {
		<-done
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

type noopOutcome struct{ o probes.Outcome }
