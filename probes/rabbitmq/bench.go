package rabbitmq

import (
	"cmp"
	"fmt"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// perfTestProfile is rabbitmq-perf-test's PerfTestMulti run (`dbcanary bench`).
func perfTestProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "rabbitmq-perftest",
		Description: "rabbitmq-perf-test: 2 publishers (persistent messages, publisher confirms), the probe's consumer reading them back, every body compared byte for byte",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark RabbitMQ (PerfTestMulti, producer-count 2, consumer-count 4, time-limit 30)",
		Sources:     []string{"james-db"},
		Verified:    "RabbitMQ bodies byte for byte",
		Defaults: func(p *probes.BenchParams) {
			p.Workers = cmp.Or(p.Workers, 2)
			p.DefaultDuration(30 * time.Second)
			if len(p.Mix) == 0 {
				p.Mix = []probes.Weighted{{Op: OpPublish, Weight: 1}}
			}
		},
		Configure: func(c probes.Config, _ probes.BenchParams) (probes.Config, error) {
			orig, ok := c.(*Config)
			if !ok {
				return nil, fmt.Errorf("not a rabbitmq section: %T", c)
			}
			cp := *orig
			// No message may be dropped for length while the consumer catches up.
			cp.MaxLength = max(cp.MaxLength, 10_000_000)
			return &cp, nil
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			return []probes.BenchStage{{Name: "perftest", Mix: p.Mix, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(2 * time.Second)}}
		},
		Tables: func(probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutPerfTest, Send: OpPublish, Receive: OpConsume},
				{Layout: probes.LayoutSummary, UnitOf: func(string) (string, float64) { return "msg/s", 1 }}}
		},
		Notes: func(probes.BenchParams) []string {
			return []string{"Each publisher waits for the broker's confirm of every message before the next (PerfTest --confirm 1 per producer); PerfTest without --confirm publishes unthrottled, which saturates a small broker. The probe reads its queue with one consumer: PerfTest's 4 consumers each had a queue of their own, so its receive rate counts every message four times."}
		},
	}
}
