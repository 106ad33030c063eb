package metrics

import (
	"fmt"
	"iter"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func ring(n int, down ...int) NodeStates {
	return func() iter.Seq2[string, bool] {
		return func(yield func(string, bool) bool) {
			for i := range n {
				up := true
				for _, d := range down {
					up = up && d != i
				}
				if !yield(fmt.Sprintf("10.0.%d.%d:9042", i/256, i%256), up) {
					return
				}
			}
		}
	}
}

// nodeSeries gathers dbcanary_store_node_up as "target backend node" -> value.
func nodeSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "dbcanary_store_node_up" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			got[l["target"]+" "+l["backend"]+" "+l["node"]] = m.GetGauge().GetValue()
		}
	}
	return got
}

func TestNodeUp(t *testing.T) {
	n := NewNodeUp()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(n)
	n.Set("cas", "kv", ring(3, 1))
	got := nodeSeries(t, reg)
	want := map[string]float64{
		"cas kv 10.0.0.0:9042": 1,
		"cas kv 10.0.0.1:9042": 0,
		"cas kv 10.0.0.2:9042": 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A node that leaves the ring, and a removed target, leave no series.
	n.Set("cas", "kv", ring(2))
	if got := nodeSeries(t, reg); len(got) != 2 {
		t.Fatalf("after a node left: %v, want 2 series", got)
	}
	n.Set("cas", "", nil)
	if got := nodeSeries(t, reg); len(got) != 0 {
		t.Fatalf("after the target left: %v, want none", got)
	}
}

// A ring larger than the bound exports MaxNodesPerTarget nodes, its down ones among them.
func TestNodeUpBounded(t *testing.T) {
	n := NewNodeUp()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(n)
	n.Set("big", "kv", ring(300, 299, 150))
	n.Set("small", "kv", ring(3))
	got := nodeSeries(t, reg)
	if len(got) != MaxNodesPerTarget+3 {
		t.Fatalf("%d series, want %d", len(got), MaxNodesPerTarget+3)
	}
	if v, ok := got["big kv 10.0.1.43:9042"]; !ok || v != 0 {
		t.Errorf("down node 299: %v %v, want exported at 0", v, ok)
	}
	if v, ok := got["big kv 10.0.0.150:9042"]; !ok || v != 0 {
		t.Errorf("down node 150: %v %v, want exported at 0", v, ok)
	}
}
