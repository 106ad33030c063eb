package opensearch

import (
	"github.com/dbcanary/dbcanary/probes"
)

// The one record of the OpenSearch backend. What the generated rules and
// boards know of it: visibility's phases (indexed, visible) are on /metrics
// only: its board panel and alerts are on the whole index-to-searchable lag.
func init() {
	probes.Register(probes.Backend{
		Name:      "opensearch",
		NewConfig: func() probes.Config { c := DefaultConfig; return &c },
		New:       func(t probes.Target) (probes.Probe, error) { return New(t) },
		Facts: probes.Facts{
			Title: "OpenSearch",
			Nodes: true, // NodeStates (nodes.go): dbcanary_store_node_up
			Ops: []probes.OpFacts{
				{Name: OpIndex}, {Name: OpBulk}, {Name: OpSearchAll}, {Name: OpSearchTerm}, {Name: OpSearchPhrase}, {Name: OpGet},
				{Name: OpVisibility, Title: "visibility lag (index to searchable)"},
				{Name: probes.OpLedgerWrite}, {Name: probes.OpLedgerCheck},
			},
			Panels: []probes.Panel{{
				Title:       "Search p99: default / term / phrase vs baseline",
				Description: "p99 of each search divided by its documented p99 (pmc workload). Lines at the warning and critical factors.",
				Queries:     []probes.Query{{Series: probes.SeriesLatencyVsBaseline, Ops: "search_.*", Quantile: 0.99, Legend: "{{target}} {{op}}"}},
			}},
		},
		Bench: []probes.BenchProfile{pmcProfile()},
	})
}
