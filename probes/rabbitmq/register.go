package rabbitmq

import (
	"github.com/dbcanary/dbcanary/probes"
)

// The one record of the RabbitMQ backend. Its own board panel sets the
// broker's confirm beside the end-to-end delivery.
func init() {
	probes.Register(probes.Backend{
		Name:      "rabbitmq",
		NewConfig: func() probes.Config { c := DefaultConfig; return &c },
		New:       func(t probes.Target) (probes.Probe, error) { return New(t) },
		Facts: probes.Facts{
			Title: "RabbitMQ",
			Nodes: true, // NodeStates (nodes.go): dbcanary_store_node_up
			Ops:   []probes.OpFacts{{Name: OpPublish}, {Name: OpConsume}, {Name: probes.OpLedgerWrite}, {Name: probes.OpLedgerCheck}},
			Panels: []probes.Panel{{
				Title:        "Confirm latency (publish) vs end-to-end latency (consume), p99",
				Description:  "publish ends at the broker's confirm; consume runs from the publish's intended start to receipt.",
				Queries:      []probes.Query{{Series: probes.SeriesLatency, Ops: OpPublish + "|" + OpConsume, Quantile: 0.99, Legend: "{{target}} {{op}} p99"}},
				ThresholdsOf: OpPublish,
			}},
		},
		Bench: []probes.BenchProfile{perfTestProfile()},
	})
}
