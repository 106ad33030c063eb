package engine_test

import (
	"context"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/internal/status"
	"github.com/dbcanary/dbcanary/probes"
)

// ringProbe knows its store's nodes (engine.NodeStater), as the Cassandra,
// OpenSearch and RabbitMQ probes do.
type ringProbe struct{}

var ring = struct {
	sync.Mutex
	up map[string]bool
}{up: map[string]bool{"10.0.0.1:9042": true, "10.0.0.2:9042": true}}

func (ringProbe) Prepare(context.Context) error                      { return nil }
func (ringProbe) Close() error                                       { return nil }
func (ringProbe) Run(context.Context, string, *probes.Outcome) error { return nil }
func (ringProbe) NodeStates() iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		ring.Lock()
		defer ring.Unlock()
		for n, up := range ring.up {
			if !yield(n, up) {
				return
			}
		}
	}
}

func init() {
	probes.Register(probes.Backend{
		Name:      "ringtest",
		NewConfig: func() probes.Config { return &stallConfig{} },
		New:       func(probes.Target) (probes.Probe, error) { return ringProbe{}, nil },
	})
}

// TestNodeStates: a probe that knows its nodes exports
// dbcanary_store_node_up per node, read at each scrape, and the status page
// (an engine.NodeObserver) gets the same view; a removed target leaves no
// node series.
func TestNodeStates(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := engine.New(metrics.NewWith(reg, metrics.Options{}), reg, enginetest.Logger(), 2*time.Second)
	st := status.New(status.Options{})
	e.SetObserver(st)
	h := &enginetest.Harness{Registry: reg, Engine: e}
	if err := e.Apply(enginetest.Parse(t, `
global: {instance_id: t}
targets:
  - {name: r, backend: ringtest, ops: {op: {rate: 1}}}
`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	node := func(n string) float64 {
		return h.Value(t, "dbcanary_store_node_up", enginetest.L{"target": "r", "backend": "ringtest", "node": n})
	}
	if node("10.0.0.1:9042") != 1 || node("10.0.0.2:9042") != 1 {
		t.Errorf("nodes up: %v %v", node("10.0.0.1:9042"), node("10.0.0.2:9042"))
	}
	ring.Lock()
	ring.up["10.0.0.2:9042"] = false
	ring.Unlock()
	if node("10.0.0.2:9042") != 0 {
		t.Error("node 2 down is not 0 at the next scrape")
	}
	snap := st.Snapshot()
	if len(snap.Targets) != 1 || len(snap.Targets[0].Nodes) != 2 || snap.Targets[0].Nodes[0] != (status.NodeStatus{Node: "10.0.0.2:9042", Up: false}) {
		t.Errorf("status nodes: %+v", snap.Targets)
	}
	if err := e.Apply(enginetest.Parse(t, "global: {instance_id: t}\ntargets: []\n")); err != nil {
		t.Fatal(err)
	}
	if ms := h.Find(t, "dbcanary_store_node_up", enginetest.L{}); len(ms) != 0 {
		t.Errorf("%d node series left after the target was removed", len(ms))
	}
}
