package opensearch

import (
	"cmp"
	"fmt"
	"strconv"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// pmcProfile is opensearch-benchmark's pmc workload (`dbcanary bench`).
func pmcProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "opensearch-pmc",
		Description: "opensearch-benchmark pmc: index-append (bulk), then the default (match_all), term and phrase searches at 20 ops/s; every search checked against the exact expected hits",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark OpenSearch (opensearch-benchmark --workload=pmc --pipeline=benchmark-only)",
		Sources:     []string{"james-db"},
		Verified:    "OpenSearch documents field by field and searches against the exact expected hits",
		Params: []probes.BenchParam{{Name: "bulk-size", Help: "documents per bulk request of index-append (default 500, at most 1000)", Check: func(v string) error {
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 1000 {
				return fmt.Errorf("%q is not a number of documents from 1 to 1000", v)
			}
			return nil
		}}},
		Defaults: func(p *probes.BenchParams) {
			p.Workers = cmp.Or(p.Workers, 8)
			p.SetDefault("bulk-size", "500")
			p.DefaultDuration(15 * time.Second)
			if p.Rate == 0 && !p.ClosedLoop {
				p.Rate = 20
			}
			if p.Timeout == 0 {
				p.Timeout = 60 * time.Second // the reference bulk p100 is 14.7 s
			}
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			orig, ok := c.(*Config)
			if !ok {
				return nil, fmt.Errorf("not an opensearch section: %T", c)
			}
			cp := *orig
			cp.BulkSize = p.Int("bulk-size")
			// Indices of the run's own, as opensearch-benchmark's
			// delete-index/create-index: the run starts on an empty index and
			// leaves nothing behind.
			cp.benchIndex = true
			return &cp, nil
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			w := p.WarmupOr(2 * time.Second)
			search := func(name, op string) probes.BenchStage {
				return probes.BenchStage{Name: name, Mix: []probes.Weighted{{Op: op, Weight: 1}}, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: w}
			}
			return []probes.BenchStage{
				{Name: "index-append", Mix: []probes.Weighted{{Op: OpBulk, Weight: 1}}, Workers: p.Workers, Duration: p.Duration, MaxOps: p.Ops, Warmup: w},
				search("default", OpSearchAll),
				search("term", OpSearchTerm),
				search("phrase", OpSearchPhrase),
			}
		},
		Tables: func(p probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutSummary, UnitOf: func(op string) (string, float64) {
				if op == OpBulk {
					return "docs/s", float64(p.Int("bulk-size"))
				}
				return "ops/s", 1
			}}}
		},
		Notes: func(p probes.BenchParams) []string {
			return []string{fmt.Sprintf("index-append sends bulk requests of %d generated documents (body_words of the target's config) with %d clients; pmc's documents are full-text articles, larger than these.", p.Int("bulk-size"), p.Workers)}
		},
	}
}
