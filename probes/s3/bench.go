package s3

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// sizesProfile is s3-benchmark over four object sizes and 8..16 threads (`dbcanary bench`).
func sizesProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "s3-sizes",
		Description: "s3-benchmark: upload objects of 4 KiB, 128 KiB, 1 MiB and 8 MiB, then download them with 8 to 16 threads, time to first and last byte, every byte compared",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark S3 storage (s3-benchmark, 4 KB / 128 KB / 1 MB / 8 MB, 8..16 threads)",
		Sources:     []string{"james-db"},
		Verified:    "S3 objects byte for byte",
		Defaults: func(p *probes.BenchParams) {
			if len(p.Sizes) == 0 {
				p.Sizes = []Size{4 * KiB, 128 * KiB, MiB, 8 * MiB}
			}
			if len(p.WorkerSteps) == 0 {
				if p.Workers > 0 {
					p.WorkerSteps = []int{p.Workers}
				} else {
					p.WorkerSteps = []int{8, 9, 10, 11, 12, 13, 14, 15, 16}
				}
			}
			p.Workers = slices.Max(p.WorkerSteps)
			if p.Duration == 0 && p.Ops == 0 {
				p.Duration = 5 * time.Second
			}
			if p.Timeout == 0 {
				p.Timeout = 60 * time.Second
			}
			if len(p.Mix) == 0 {
				p.Mix = []probes.Weighted{{Op: OpGet, Weight: 1}}
			}
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			orig, ok := c.(*Config)
			if !ok {
				return nil, fmt.Errorf("not an s3 section: %T", c)
			}
			cp := *orig
			cp.Sizes = p.Sizes
			// One object per worker, so no download waits for another's object.
			cp.MaxObjectsPerSize = min(max(p.Workers+2, cp.MaxObjectsPerSize), 100)
			return &cp, nil
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			var st []probes.BenchStage
			for _, size := range p.Sizes {
				g := size.String()
				st = append(st, probes.BenchStage{Name: "upload " + g, Group: g, Setup: true,
					Mix: []probes.Weighted{{Op: OpName(OpPut, size), Weight: 1}}, Workers: min(p.Workers, 8), MaxOps: int64(p.Workers + 2)})
				// --mix names op kinds (get=1, put=1): the ops of this size.
				var mix []probes.Weighted
				var kinds []string
				for _, w := range p.Mix {
					mix = append(mix, probes.Weighted{Op: OpName(w.Op, size), Weight: w.Weight})
					kinds = append(kinds, w.Op)
				}
				for _, n := range p.WorkerSteps {
					st = append(st, probes.BenchStage{Name: fmt.Sprintf("%s %s x%d", strings.Join(kinds, "+"), g, n), Group: g,
						Mix: mix, Workers: n, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(0)})
				}
			}
			return st
		},
		Tables: func(p probes.BenchParams) []probes.BenchTable {
			var out []probes.BenchTable
			for _, size := range p.Sizes {
				out = append(out, probes.BenchTable{Layout: probes.LayoutDownloads, ID: "s3-" + size.String(), Group: size.String(),
					Op: OpName(OpGet, size), SetupOp: OpName(OpPut, size), Phases: [2]string{PhaseFirstByte, PhaseLastByte},
					Note: "Reference: the documented range over 8..16 threads (OVH Swift S3, b2-30 client); a verdict compares with its upper end, the worst figure measured."})
			}
			return append(out, probes.BenchTable{Layout: probes.LayoutSummary})
		},
		Notes: func(probes.BenchParams) []string {
			return []string{"Throughput is MiB/s of object bodies read (s3-benchmark's MB/s). TTFB and TTLB count from each download's start (closed loop: when its worker took it)."}
		},
	}
}
