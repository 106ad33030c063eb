package s3

import (
	"cmp"
	"fmt"
	"strconv"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// mongooseDoc is the reference document of the Mongoose profiles.
const mongooseDoc = "mongoose-v3.5-performance.txt"

// streamNote states the memory bound of the streamed profiles.
const streamNote = "Objects are streamed: each PUT body is generated as it is sent (a single PUT up to the object size, no multipart buffer) and each GET body is compared with the regenerated content as it arrives, 64 KiB at a time, so memory is bounded by the ops in flight (about 130 KiB of buffers each), not by the object size; the report's peak RSS shows it."

// bandwidthProfile is Mongoose's bandwidth test: 100 MB objects created at a
// concurrency limit of 100, then read back.
func bandwidthProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "s3-bandwidth",
		Description: "Mongoose bandwidth: create 100 MiB objects with 100 in flight, then read them back with 100 in flight, every byte compared as it streams",
		Reproduces:  mongooseDoc + ", 1.2.2 Bandwidth (creating 100 MB objects, concurrency limit 100, amzs3 driver)",
		Verified:    "S3 objects byte for byte, compared while streaming",
		Params: []probes.BenchParam{
			{Name: "size", Help: "object size (default 100MiB, at most 1GiB: one PUT)", Check: checkSinglePut},
			{Name: "concurrency", Help: "ops in flight, the concurrency limit (default 100, or --workers)", Check: probes.PositiveInt},
		},
		Defaults: func(p *probes.BenchParams) {
			p.SetDefault("size", "100MiB")
			if p.Workers > 0 {
				p.SetDefault("concurrency", strconv.Itoa(p.Workers))
			}
			p.SetDefault("concurrency", "100")
			p.Workers = p.Int("concurrency")
			p.DefaultDuration(30 * time.Second)
			p.Timeout = cmp.Or(p.Timeout, 10*time.Minute)
			if len(p.Mix) == 0 {
				p.Mix = []probes.Weighted{{Op: OpPut, Weight: 1}, {Op: OpGet, Weight: 1}}
			}
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			return withSize(c, benchSize(p), func(cp *Config) {
				// A put overwrites the oldest idle object once there are
				// this many: at most 2 x concurrency objects are stored.
				cp.MaxObjectsPerSize = p.Workers
			})
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			var st []probes.BenchStage
			names := map[string]string{OpPut: "create", OpGet: "read"}
			for _, w := range p.Mix { // one stage per op kind, in the order of --mix
				st = append(st, probes.BenchStage{Name: cmp.Or(names[w.Op], w.Op), Mix: []probes.Weighted{{Op: OpName(w.Op, benchSize(p)), Weight: 1}},
					Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(0)})
			}
			return st
		},
		Tables: func(p probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutSummary, UnitOf: mibPerOp(benchSize(p))}}
		},
		Notes: func(p probes.BenchParams) []string {
			return []string{"Throughput is MiB/s of object bodies (Mongoose's bandwidth, warp's MiB/s). The reference document shows its figures only as a graph (v3.4.2 against v3.5.0 on 8-core machines and a 10 GBit network): there is no figure to compare with; test/bench/peer-s3.sh bandwidth runs warp on the same shape.",
				streamNote}
		},
	}
}

// recycleProfile is Mongoose's recycle mode: a prepared set of objects read
// again and again, in order.
func recycleProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "s3-recycle",
		Description: "Mongoose recycle mode: write a set of 10 000 objects once, then read them again and again in order, every byte compared",
		Reproduces:  mongooseDoc + ", 1.2.4 Recycle Mode (read 10K prepared items again and again)",
		Verified:    "S3 objects byte for byte",
		Params: []probes.BenchParam{
			{Name: "items", Help: "objects in the prepared set (default 10000)", Check: probes.PositiveInt},
			{Name: "size", Help: "object size (default 4KiB)", Check: checkSinglePut},
		},
		Defaults: func(p *probes.BenchParams) {
			p.SetDefault("items", "10000")
			p.SetDefault("size", "4KiB")
			p.Workers = cmp.Or(p.Workers, 8)
			p.DefaultDuration(20 * time.Second)
			p.Timeout = cmp.Or(p.Timeout, time.Minute)
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			return withSize(c, benchSize(p), func(cp *Config) {
				cp.MaxObjectsPerSize = p.Int("items")
				cp.recycle = true
			})
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			size := benchSize(p)
			return []probes.BenchStage{
				{Name: "prepare", Setup: true, Mix: []probes.Weighted{{Op: OpName(OpPut, size), Weight: 1}}, Workers: max(p.Workers, 16), MaxOps: int64(p.Int("items"))},
				{Name: "recycle", Mix: []probes.Weighted{{Op: OpName(OpGet, size), Weight: 1}}, Workers: p.Workers, Rate: p.Rate,
					Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(2 * time.Second)},
			}
		},
		Tables: func(p probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutSummary}}
		},
		Notes: func(p probes.BenchParams) []string {
			return []string{fmt.Sprintf("The prepare stage writes the %d objects once; the recycle stage reads them in order, round the set, each read compared byte for byte. The reference document shows its figures only as a graph, measured with Mongoose's dummy driver (no storage): there is no figure to compare with.", p.Int("items"))}
		},
	}
}

// withSize is the target's section with one object size, sent as a single
// PUT (the multipart threshold raised to the size), adjusted by set.
func withSize(c probes.Config, size Size, set func(cp *Config)) (probes.Config, error) {
	orig, ok := c.(*Config)
	if !ok {
		return nil, fmt.Errorf("not an s3 section: %T", c)
	}
	cp := *orig
	cp.Sizes = []Size{size}
	cp.MultipartThreshold = max(cp.MultipartThreshold, size)
	set(&cp)
	return &cp, nil
}

// benchSize is the size parameter (checked by checkSinglePut).
func benchSize(p probes.BenchParams) Size {
	s, _ := probes.ParseSize(p.Values["size"])
	return s
}

// checkSinglePut accepts an object size one PUT can carry.
func checkSinglePut(v string) error {
	s, err := probes.ParseSize(v)
	if err != nil {
		return err
	}
	if s < 1 || s > maxObjectSize {
		return fmt.Errorf("%s: an object size from 1B to %s (one PUT)", v, Size(maxObjectSize))
	}
	return nil
}

// mibPerOp is a LayoutSummary UnitOf: MiB/s of objects of the size.
func mibPerOp(size Size) func(string) (string, float64) {
	return func(string) (string, float64) { return "MiB/s", float64(size) / float64(MiB) }
}
