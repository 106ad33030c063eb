package cassandra

import (
	"github.com/dbcanary/dbcanary/probes"
)

// The one record of the Cassandra backend. What the generated rules and
// boards know of it: the ops of both profiles (mixed_workload's insert, read
// and read_miss; ycsb_a's read and update), then the ledger's.
// register_test.go holds the facts to Config.Ops().
func init() {
	probes.Register(probes.Backend{
		Name:      "cassandra",
		NewConfig: func() probes.Config { c := DefaultConfig; return &c },
		New:       func(t probes.Target) (probes.Probe, error) { return New(t) },
		Facts: probes.Facts{
			Title: "Cassandra",
			Nodes: true, // NodeStates (nodes.go): dbcanary_store_node_up
			Ops: []probes.OpFacts{
				{Name: OpInsert}, {Name: OpRead}, {Name: OpReadMiss}, {Name: OpUpdate},
				{Name: probes.OpLedgerWrite}, {Name: probes.OpLedgerCheck},
			},
		},
		Bench: benchProfiles(),
	})
}
