// Package enginetest runs a real engine from a YAML config in tests and reads
// its metrics back, so probe integration tests share one idiom
// (TestPackageExample runs it):
//
//	h := enginetest.Start(t, `targets: [{name: n1, backend: noop, ops: {noop: {rate: 50}}}]`)
//	enginetest.WaitFor(t, 20*time.Second, "3 ops", func() bool {
//		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "noop", "result": "ok"}) >= 3
//	})
package enginetest

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/metrics"
)

// L is a label filter: a series matches when it has every listed label value.
type L map[string]string

// Harness is a running engine with its own registry.
type Harness struct {
	Registry *prometheus.Registry
	Metrics  *metrics.Metrics
	Engine   *engine.Engine
	Config   *config.Config
}

// Logger logs to stderr at debug level when DBCANARY_TEST_LOG=1, else nowhere.
func Logger() *slog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("DBCANARY_TEST_LOG") == "1" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Parse parses a config or fails the test.
func Parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// Start parses the config, starts the engine and stops it when the test ends.
func Start(t testing.TB, yaml string) *Harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.NewWith(reg, metrics.Options{})
	e := engine.New(m, reg, Logger(), 2*time.Second)
	cfg := Parse(t, yaml)
	if err := e.Apply(cfg); err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Cleanup(e.Stop)
	return &Harness{Registry: reg, Metrics: m, Engine: e, Config: cfg}
}

// Find returns the metrics of a family whose labels match.
func (h *Harness) Find(t testing.TB, name string, match L) []*dto.Metric {
	t.Helper()
	mfs, err := h.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range match {
				if have[k] != v {
					continue metric
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// Value sums gauges or counters matching the labels.
func (h *Harness) Value(t testing.TB, name string, match L) float64 {
	t.Helper()
	var sum float64
	for _, m := range h.Find(t, name, match) {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

// HistogramCount sums the sample counts of matching histograms.
func (h *Harness) HistogramCount(t testing.TB, name string, match L) uint64 {
	t.Helper()
	var n uint64
	for _, m := range h.Find(t, name, match) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// HistogramSum sums the sample sums of matching histograms.
func (h *Harness) HistogramSum(t testing.TB, name string, match L) float64 {
	t.Helper()
	var s float64
	for _, m := range h.Find(t, name, match) {
		s += m.GetHistogram().GetSampleSum()
	}
	return s
}

// WaitFor polls cond every 100 ms until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Indent indents a YAML block for embedding in a config template.
func Indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}
