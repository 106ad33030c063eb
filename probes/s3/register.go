package s3

import (
	"github.com/dbcanary/dbcanary/probes"
)

// The one record of the S3 backend.
func init() {
	probes.Register(probes.Backend{
		Name: "s3",
		NewConfig: func() probes.Config {
			c := DefaultConfig
			c.Sizes = append([]Size(nil), DefaultConfig.Sizes...)
			return &c
		},
		New:   func(t probes.Target) (probes.Probe, error) { return New(t) },
		Facts: facts(),
		Bench: []probes.BenchProfile{sizesProfile(), bandwidthProfile(), recycleProfile()},
	})
}

// facts are what the generated rules and boards know of S3: each object op
// at the reference sizes (the default sizes: 4 KiB, 128 KiB, 1 MiB, 8 MiB;
// an op at another configured size has no rules), grouped by kind; GET's
// time to first and last byte.
func facts() probes.Facts {
	var ops []probes.OpFacts
	for _, kind := range []string{OpPut, OpGet, OpHead, OpDelete} {
		for _, s := range DefaultConfig.Sizes {
			op := probes.OpFacts{Name: OpName(kind, s)}
			if kind == OpGet {
				op.Title = op.Name + ": time to first byte vs last byte"
				op.Phases = []string{PhaseFirstByte, PhaseLastByte}
			}
			ops = append(ops, op)
		}
	}
	return probes.Facts{
		Title: "S3",
		Ops:   append(ops, probes.OpFacts{Name: OpList}, probes.OpFacts{Name: probes.OpLedgerWrite}, probes.OpFacts{Name: probes.OpLedgerCheck}),
		Panels: []probes.Panel{{
			Title: "GET throughput",
			Description: "Bytes received by GET ops per second over 5m. Benchmarks (8..16 threads): 0.6 / 18.6 / 58.2 / 58.6 MB/s " +
				"for 4 KB / 128 KB / 1 MB / 8 MB; the canary's rate is far lower.",
			Queries: []probes.Query{{Series: probes.SeriesBytes, Direction: "received", Ops: OpGet + "_.*", Legend: "{{target}} {{op}}"}},
		}},
	}
}
