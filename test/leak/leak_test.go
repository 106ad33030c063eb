// Package leak checks that a long-running dbcanary does not grow: series,
// goroutines and heap stay bounded across config reloads, and no goroutine
// outlives the engine or a probe's Close.
package leak

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/metrics"
	_ "github.com/dbcanary/dbcanary/probes/noop"
)

const (
	targets = 200 // noop targets running at once
	reloads = 50
	rate    = 5 // ops/s per target
	shift   = 4 // targets removed and added by each reload
)

// reloadConfig is the config of reload i: a window of `targets` targets that
// slides by `shift` each reload (shift removed, shift added), and every
// fifth target's delay follows i, so it is replaced (stopped and restarted).
func reloadConfig(t testing.TB, i int) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("global: {instance_id: leak, timeout: 1s, max_in_flight: 2}\ntargets:\n")
	for j := i * shift; j < i*shift+targets; j++ {
		delay := 0
		if j%5 == 0 {
			delay = i % 3 // changes with the reload: the target is replaced
		}
		fmt.Fprintf(&b, "  - {name: t%d, backend: noop, labels: {shard: s%d}, ops: {noop: {rate: %d}}, noop: {delay: %dms, failure_ratio: 0.1, failure_cause: refused}}\n",
			j, j%7, rate, delay)
	}
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func series(t testing.TB, reg *prometheus.Registry) (n int, targetsSeen int) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n++
			for _, l := range m.GetLabel() {
				if l.GetName() == "target" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	return n, len(seen)
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestReloadsDoNotLeak runs 200 noop targets at 5 ops/s through 50 reloads
// that add, remove and replace targets, and checks that the series count,
// the goroutine count and the heap come back to where they started, and that
// no goroutine outlives the engine.
func TestReloadsDoNotLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	baseGoroutines := runtime.NumGoroutine()

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	e := engine.New(m, reg, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second)
	stopped := false
	defer func() {
		if !stopped {
			e.Stop()
		}
	}()

	settle := func() { time.Sleep(300 * time.Millisecond) } // a few ops per target run between reloads
	if err := e.Apply(reloadConfig(t, 0)); err != nil {
		t.Fatal(err)
	}
	settle()
	startSeries, startTargets := series(t, reg)
	if startTargets != targets {
		t.Fatalf("%d targets have series, want %d", startTargets, targets)
	}

	var warmHeap uint64
	var warmGoroutines int
	for i := 1; i <= reloads; i++ {
		if err := e.Apply(reloadConfig(t, i)); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		settle()
		n, seen := series(t, reg)
		if seen != targets || n != startSeries {
			t.Errorf("reload %d: %d series for %d targets, want %d series for %d targets (a removed target's series must go)", i, n, seen, startSeries, targets)
		}
		if i == 5 {
			warmHeap, warmGoroutines = heap(), runtime.NumGoroutine()
		}
	}
	endGoroutines := runtime.NumGoroutine()
	endHeap := heap()
	t.Logf("series: %d; goroutines: base %d, after 5 reloads %d, after %d reloads %d; heap: after 5 reloads %.1f MiB, after %d %.1f MiB",
		startSeries, baseGoroutines, warmGoroutines, reloads, endGoroutines, float64(warmHeap)/(1<<20), reloads, float64(endHeap)/(1<<20))

	// Same number of targets, so the same number of goroutines (each target
	// has a scheduler and max_in_flight workers), give or take a transient
	// Prepare goroutine per target.
	if endGoroutines > warmGoroutines+targets/2 {
		t.Errorf("goroutines grew from %d to %d over %d reloads", warmGoroutines, endGoroutines, reloads-5)
	}
	// Histograms fill sparse buckets as samples arrive; anything beyond that
	// and a generous margin is state left behind by removed targets.
	if endHeap > warmHeap+warmHeap/2+16<<20 {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB over %d reloads", float64(warmHeap)/(1<<20), float64(endHeap)/(1<<20), reloads-5)
	}

	// Back to the first config: exactly the first series set.
	if err := e.Apply(reloadConfig(t, 0)); err != nil {
		t.Fatal(err)
	}
	settle()
	if n, seen := series(t, reg); n != startSeries || seen != targets {
		t.Errorf("back at the first config: %d series for %d targets, want %d", n, seen, startSeries)
	}

	e.Stop()
	stopped = true
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > baseGoroutines+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > baseGoroutines+2 {
		t.Errorf("%d goroutines 20 s after the engine stopped, %d before it started", g, baseGoroutines)
	}
}

// TestRunOnceDoesNotLeak: `dbcanary once` builds and closes every probe.
func TestRunOnceDoesNotLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := reloadConfig(t, 0)
	cfg.Targets = cfg.Targets[:20]
	rows := engine.RunOnce(t.Context(), cfg, engine.EphemeralInstanceID(cfg.Global.InstanceID, "once"), slog.New(slog.DiscardHandler))
	if len(rows) != 20 {
		t.Errorf("%d rows, want 20", len(rows))
	}
}
