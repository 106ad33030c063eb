package cassandra

import (
	"github.com/dbcanary/dbcanary/internal/ledger"
	"github.com/dbcanary/dbcanary/probes"
)

// What the generated rules and boards know of Cassandra: the ops of both
// profiles (mixed_workload's insert, read and read_miss; ycsb_a's read and
// update), then the ledger's. facts_test.go holds it to Config.Ops().
func init() {
	probes.Describe("cassandra", probes.Facts{
		Title: "Cassandra",
		Ops: []probes.OpFacts{
			{Name: OpInsert}, {Name: OpRead}, {Name: OpReadMiss}, {Name: OpUpdate},
			{Name: ledger.OpWrite}, {Name: ledger.OpCheck},
		},
	})
}
