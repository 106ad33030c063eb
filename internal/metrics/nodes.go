package metrics

import (
	"cmp"
	"iter"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxNodesPerTarget bounds dbcanary_store_node_up per target. A larger ring
// exports its down nodes first, then up ones, by address, up to the bound;
// the rest are left out (docs/sizing.md).
const MaxNodesPerTarget = 64

// NodeStates is what a target's driver knows of its store's nodes: each
// node's address and whether the driver sees it up. It is read at every
// scrape, so a node that left the ring has no series.
type NodeStates func() iter.Seq2[string, bool]

// NodeUp exports dbcanary_store_node_up{target, backend, node}: 1 when the
// target's driver sees the node up, 0 when down. Series are built per scrape
// from the registered targets' drivers: none outlives its node or target.
type NodeUp struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	targets map[string]nodeSource
}

type nodeSource struct {
	backend string
	states  NodeStates
}

// NewNodeUp returns the collector, with no target yet; register it once.
func NewNodeUp() *NodeUp {
	return &NodeUp{
		desc: prometheus.NewDesc(namespace+"_store_node_up",
			"1 if the target's driver sees this node of the store up, 0 if down. At most 64 nodes per target, down ones first.",
			[]string{"target", "backend", "node"}, nil),
		targets: map[string]nodeSource{},
	}
}

// Set makes target's nodes those states reports (nil removes the target).
func (n *NodeUp) Set(target, backend string, states NodeStates) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if states == nil {
		delete(n.targets, target)
		return
	}
	n.targets[target] = nodeSource{backend, states}
}

// Describe implements prometheus.Collector.
func (n *NodeUp) Describe(ch chan<- *prometheus.Desc) { ch <- n.desc }

// Collect implements prometheus.Collector.
func (n *NodeUp) Collect(ch chan<- prometheus.Metric) {
	n.mu.Lock()
	targets := make(map[string]nodeSource, len(n.targets))
	for t, s := range n.targets {
		targets[t] = s
	}
	n.mu.Unlock()
	type node struct {
		addr string
		up   bool
	}
	for target, src := range targets {
		var nodes []node
		seen := map[string]bool{}
		for addr, up := range src.states() {
			if !seen[addr] {
				seen[addr] = true
				nodes = append(nodes, node{addr, up})
			}
		}
		slices.SortFunc(nodes, func(a, b node) int {
			if a.up != b.up {
				if !a.up {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.addr, b.addr)
		})
		for _, nd := range nodes[:min(len(nodes), MaxNodesPerTarget)] {
			v := 0.0
			if nd.up {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(n.desc, prometheus.GaugeValue, v, target, src.backend, nd.addr)
		}
	}
}
