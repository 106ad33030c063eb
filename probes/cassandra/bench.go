package cassandra

import (
	"cmp"
	"fmt"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

const benchVerified = "Cassandra rows byte for byte"

// benchProfiles are the reference benchmarks of Cassandra (`dbcanary bench`).
func benchProfiles() []probes.BenchProfile {
	return []probes.BenchProfile{mixedProfile(), ycsbAProfile(), maxWriteProfile(), readWriteProfile(), recycleProfile()}
}

// withProfile is the target's section running one of the probe's profiles.
func withProfile(c probes.Config, set func(cp *Config)) (probes.Config, error) {
	orig, ok := c.(*Config)
	if !ok {
		return nil, fmt.Errorf("not a cassandra section: %T", c)
	}
	cp := *orig
	set(&cp)
	return &cp, nil
}

// mixedProfile is cassandra-stress user profile mixed_workload.
func mixedProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "cassandra-mixed",
		Description: "cassandra-stress user profile=mixed_workload: insert (uuid key, blobs of 1..10000 and 1..100000 bytes), then ops(insert=1,read=4), 8 threads, every read compared byte for byte",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark Cassandra (cassandra-stress mixed_workload, threads=8, cl=ONE)",
		Sources:     []string{"ycsb"},
		TotalRates:  true,
		Verified:    benchVerified,
		Defaults: func(p *probes.BenchParams) {
			p.Workers = cmp.Or(p.Workers, 8)
			p.DefaultDuration(20 * time.Second)
			if len(p.Mix) == 0 {
				p.Mix = []probes.Weighted{{Op: OpInsert, Weight: 1}, {Op: OpRead, Weight: 4}}
			}
		},
		Configure: func(c probes.Config, _ probes.BenchParams) (probes.Config, error) {
			return withProfile(c, func(cp *Config) { cp.Profile = ProfileMixed })
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			w := p.WarmupOr(3 * time.Second)
			return []probes.BenchStage{
				{Name: "insert", Mix: []probes.Weighted{{Op: OpInsert, Weight: 1}}, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: w},
				{Name: "mixed", Mix: p.Mix, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: w},
			}
		},
		Tables: func(probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutStress}, {Layout: probes.LayoutSummary}}
		},
		Notes: func(probes.BenchParams) []string {
			return []string{"The reference document shows its cassandra-stress results only as graphs; the figures compared are the nearest documented ones, YCSB workloada on ApsaraDB Cassandra (apsaradb-cassandra-ycsb.txt), measured with 100 threads at 80 % CPU."}
		},
	}
}

// ycsbAProfile is YCSB core workload A.
func ycsbAProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "ycsb-a",
		Description: "YCSB workloada: usertable rows of 10 fields x 100 bytes (1 KB), load, then read:update 95:5 at consistency ONE, every read compared field by field",
		Reproduces:  "apsaradb-cassandra-ycsb.txt (YCSB 0.15 workloada, 1 KB rows, read:write 95:5, CL=ONE)",
		Sources:     []string{"ycsb"},
		TotalRates:  true,
		Verified:    benchVerified,
		Params:      []probes.BenchParam{{Name: "records", Help: "records to load (default 1000)", Check: probes.PositiveInt}},
		Defaults: func(p *probes.BenchParams) {
			p.Workers = cmp.Or(p.Workers, 8)
			p.SetDefault("records", "1000")
			p.DefaultDuration(20 * time.Second)
			if len(p.Mix) == 0 {
				p.Mix = []probes.Weighted{{Op: OpRead, Weight: 95}, {Op: OpUpdate, Weight: 5}}
			}
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			return withProfile(c, func(cp *Config) {
				cp.Profile = ProfileYCSBA
				cp.YCSBA.RecordCount = p.Int("records")
				cp.YCSBA.FieldLength = 100
			})
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			return []probes.BenchStage{
				// YCSB's load phase writes recordcount rows; the canary's
				// update writes a whole row the first time it takes a record.
				{Name: "load", Mix: []probes.Weighted{{Op: OpUpdate, Weight: 1}}, Workers: p.Workers, MaxOps: int64(p.Int("records"))},
				{Name: "run", Mix: p.Mix, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(3 * time.Second)},
			}
		},
		Tables: func(probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutYCSB}, {Layout: probes.LayoutSummary}}
		},
		Notes: func(p probes.BenchParams) []string {
			return []string{fmt.Sprintf("The load stage takes records at random, so of %d update ops some rewrite a record already loaded; reads only ever read records this run wrote.", p.Int("records"))}
		},
	}
}
