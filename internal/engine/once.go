package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/probes"
)

// OnceResult is one row of `dbcanary once`.
type OnceResult struct {
	Target  string
	Backend string
	Op      string
	Latency time.Duration
	Cause   probes.Cause // empty on success
	Err     error
}

// EphemeralInstanceID derives the instance id of a one-shot run (`once`,
// `bench`) from the configured one: "<id>-<kind>-<6 random hex>", at most 40
// characters. A one-shot run beside the daemon (a Kubernetes startup check in
// the same pod has the same hostname) must never read, consume or delete the
// daemon's canary data, so it works in a namespace of its own, which its
// probes remove at Close (probes.Target.Ephemeral).
func EphemeralInstanceID(id, kind string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	suffix := "-" + kind + "-" + hex.EncodeToString(b[:])
	if len(id)+len(suffix) > 40 {
		id = strings.TrimRight(id[:40-len(suffix)], "-")
	}
	return id + suffix
}

// RunOnce runs every enabled op of every target once (targets in parallel,
// ops in name order, event-driven ops awaited after the scheduled ones) and
// returns one row per op, sorted by target then op. instance is the run's own
// instance id (EphemeralInstanceID).
func RunOnce(ctx context.Context, cfg *config.Config, instance string, logger *slog.Logger) []OnceResult {
	var (
		mu  sync.Mutex
		out []OnceResult
		wg  sync.WaitGroup
	)
	for _, t := range cfg.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows := runTargetOnce(ctx, t, instance, logger)
			mu.Lock()
			out = append(out, rows...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Target != out[j].Target {
			return out[i].Target < out[j].Target
		}
		return out[i].Op < out[j].Op
	})
	return out
}

func runTargetOnce(ctx context.Context, t config.Target, instance string, logger *slog.Logger) []OnceResult {
	row := func(op string, lat time.Duration, err error) OnceResult {
		return OnceResult{Target: t.Name, Backend: t.Backend, Op: op, Latency: lat, Cause: probes.CauseOf(err), Err: err}
	}
	r, err := newRunner(t, instance, true, nil, logger)
	if err != nil {
		return []OnceResult{row("(config)", 0, err)}
	}
	defer func() { _ = r.closeProbe() }()

	var mu sync.Mutex
	async := map[string]*OnceResult{}
	asyncSeen := make(chan struct{}, 64)
	r.onReport = func(op string, lat time.Duration, err error) {
		s := r.byName[op]
		if s == nil || !s.op.Async {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, done := async[op]; !done {
			res := row(op, lat, err)
			async[op] = &res
			asyncSeen <- struct{}{}
		}
	}

	pctx, cancel := context.WithTimeout(ctx, t.Timeout)
	err = r.probe.Prepare(pctx)
	cancel()
	var rows []OnceResult
	if err != nil {
		for _, s := range r.ops {
			rows = append(rows, row(s.op.Name, 0, err))
		}
		return rows
	}
	var out probes.Outcome
	var asyncOps []*opState
	for _, s := range r.ops {
		if s.op.Async {
			asyncOps = append(asyncOps, s)
			continue
		}
		start := time.Now()
		octx, cancel := context.WithTimeout(ctx, s.op.Timeout)
		out.Reset(start)
		err := r.probe.Run(octx, s.op.Name, &out)
		if err != nil && octx.Err() == context.DeadlineExceeded && !probes.CauseOf(err).DataCause() {
			err = probes.Fail(probes.CauseTimeout, err)
		}
		cancel()
		rows = append(rows, row(s.op.Name, time.Since(start), err))
	}
	for _, s := range asyncOps {
		deadline := time.After(s.op.Timeout)
	wait:
		for {
			mu.Lock()
			res, ok := async[s.op.Name]
			mu.Unlock()
			if ok {
				rows = append(rows, *res)
				break
			}
			select {
			case <-asyncSeen:
			case <-deadline:
				rows = append(rows, row(s.op.Name, s.op.Timeout, probes.Fail(probes.CauseTimeout,
					errTimeoutAsync(s.op.Name, s.op.Timeout))))
				break wait
			case <-ctx.Done():
				rows = append(rows, row(s.op.Name, 0, ctx.Err()))
				break wait
			}
		}
	}
	return rows
}

type asyncTimeoutError struct {
	op string
	d  time.Duration
}

func (e asyncTimeoutError) Error() string {
	return "no " + e.op + " event within " + e.d.String() + " (is the op that produces it enabled?)"
}

func errTimeoutAsync(op string, d time.Duration) error { return asyncTimeoutError{op, d} }
