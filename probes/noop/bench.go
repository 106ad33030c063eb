package noop

import (
	"cmp"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// floorProfile measures the engine's own latency floor at canary rates (`dbcanary bench`).
func floorProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "floor",
		Description: "the measurement floor: the noop probe (no I/O) on an open-loop schedule at 10 ops/s, one worker; latency minus service time is the scheduler's own lateness",
		Reproduces:  "no reference document: what any figure of this machine includes before the store adds anything",
		Defaults: func(p *probes.BenchParams) {
			p.Workers = cmp.Or(p.Workers, 1)
			if p.Rate == 0 && !p.ClosedLoop {
				p.Rate = 10
			}
			p.DefaultDuration(30 * time.Second)
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			return []probes.BenchStage{{Name: "floor", Mix: []probes.Weighted{{Op: "noop", Weight: 1}}, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(time.Second)}}
		},
		Tables: func(probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutFloor}, {Layout: probes.LayoutSummary}}
		},
		Notes: func(probes.BenchParams) []string {
			return []string{"Latency counts from each op's slot in the schedule, service time from when the probe was called: the difference is how late the op started. The worker wakes for its slot itself, on a Go timer until 1.5 ms before it and in nanosleep (1 ns timer slack) for the rest, so it starts within tens of µs; a p99 in ms is the wait for a CPU on a loaded machine (see the load average)."}
		},
	}
}
