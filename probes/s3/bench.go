package s3

import (
	"fmt"
	"slices"
	"strconv"
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
		Params: []probes.BenchParam{
			{Name: "sizes", Help: "object sizes, e.g. 4KiB,1MiB (default 4KiB,128KiB,1MiB,8MiB)", Check: func(v string) error { _, err := parseSizes(v); return err }},
			{Name: "worker-steps", Help: "worker counts to step through, e.g. 8,12,16 or 8..16 (default 8..16, or --workers)", Check: func(v string) error { _, err := parseSteps(v); return err }},
			{Name: "objects", Help: "objects of each size uploaded first and downloaded at random (default the most workers + 2, at most 100; warp's --objects)", Check: checkObjects},
		},
		Defaults: func(p *probes.BenchParams) {
			p.SetDefault("sizes", "4KiB,128KiB,1MiB,8MiB")
			if p.Workers > 0 {
				p.SetDefault("worker-steps", strconv.Itoa(p.Workers))
			}
			p.SetDefault("worker-steps", "8..16")
			p.Workers = slices.Max(benchSteps(*p))
			// One object per worker and two spare, so no download waits for another's object.
			p.SetDefault("objects", strconv.Itoa(min(p.Workers+2, 100)))
			p.DefaultDuration(5 * time.Second)
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
			cp.Sizes = benchSizes(p)
			cp.MaxObjectsPerSize = p.Int("objects")
			// Every PUT creates an object, as s3-benchmark's and warp's do.
			cp.freshKeys = true
			return &cp, nil
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			var st []probes.BenchStage
			for _, size := range benchSizes(p) {
				g := size.String()
				st = append(st, probes.BenchStage{Name: "upload " + g, Group: g, Setup: true,
					Mix: []probes.Weighted{{Op: OpName(OpPut, size), Weight: 1}}, Workers: min(p.Workers, 8), MaxOps: int64(p.Int("objects"))})
				// --mix names op kinds (get=1, put=1): the ops of this size.
				var mix []probes.Weighted
				var kinds []string
				for _, w := range p.Mix {
					mix = append(mix, probes.Weighted{Op: OpName(w.Op, size), Weight: w.Weight})
					kinds = append(kinds, w.Op)
				}
				for _, n := range benchSteps(p) {
					st = append(st, probes.BenchStage{Name: fmt.Sprintf("%s %s x%d", strings.Join(kinds, "+"), g, n), Group: g,
						Mix: mix, Workers: n, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(0)})
				}
			}
			return st
		},
		Tables: func(p probes.BenchParams) []probes.BenchTable {
			var out []probes.BenchTable
			for _, size := range benchSizes(p) {
				out = append(out, probes.BenchTable{Layout: probes.LayoutDownloads, ID: "s3-" + size.String(), Group: size.String(),
					Op: OpName(OpGet, size), SetupOp: OpName(OpPut, size), Phases: [2]string{PhaseFirstByte, PhaseLastByte},
					Note: "Reference: the documented range over 8..16 threads (OVH Swift S3, b2-30 client); a verdict compares with its upper end, the worst figure measured."})
			}
			return append(out, probes.BenchTable{Layout: probes.LayoutSummary})
		},
		Notes: func(probes.BenchParams) []string {
			return []string{"Throughput is MiB/s of object bodies read (s3-benchmark's MB/s). TTFB and TTLB count from each download's start (closed loop: when its worker took it).",
				fmt.Sprintf("Each PUT writes a new object, as s3-benchmark's and warp's do (overwriting an object costs a store more: 0.55-0.65x the PUT rate on MinIO), up to %d objects or %d MiB of each size; after that PUTs overwrite the oldest. Every object of the run is deleted at the end.", maxFreshObjects, maxFreshBytes>>20)}
		},
	}
}

// checkObjects checks the objects parameter: 1 to 100 (max_objects_per_size's range).
func checkObjects(v string) error {
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 100 {
		return fmt.Errorf("%q is not a whole number from 1 to 100", v)
	}
	return nil
}

// benchSizes are the object sizes of the sizes parameter (checked by parseSizes).
func benchSizes(p probes.BenchParams) []Size {
	s, _ := parseSizes(p.Values["sizes"])
	return s
}

// benchSteps are the worker counts of the worker-steps parameter (checked by parseSteps).
func benchSteps(p probes.BenchParams) []int {
	n, _ := parseSteps(p.Values["worker-steps"])
	return n
}

// parseSizes reads object sizes: 4KiB,1MiB.
func parseSizes(v string) ([]Size, error) {
	var out []Size
	for _, s := range strings.Split(v, ",") {
		z, err := probes.ParseSize(s)
		if err != nil || z <= 0 || slices.Contains(out, z) {
			return nil, fmt.Errorf("%q is not an object size (4KiB, 1MiB) listed once", s)
		}
		out = append(out, z)
	}
	return out, nil
}

// parseSteps reads worker counts and ranges: 8,12,16 or 8..16 (1 to 256).
func parseSteps(v string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(part, "..")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err1 != nil || err2 != nil || a < 1 || b < a || b > 256 {
			return nil, fmt.Errorf("%q: want counts or ranges like 8,12,16 or 8..16 (1 to 256)", part)
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	return out, nil
}
