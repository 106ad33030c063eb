package s3

import (
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// The bandwidth profile's defaults are Mongoose's shape; its objects go as
// one streamed PUT; --workers and --param set the concurrency.
func TestBandwidthProfile(t *testing.T) {
	prof := bandwidthProfile()
	var p probes.BenchParams
	prof.Defaults(&p)
	if p.Values["size"] != "100MiB" || p.Workers != 100 || p.Int("concurrency") != 100 {
		t.Fatalf("defaults: size %s, %d workers, concurrency %s", p.Values["size"], p.Workers, p.Values["concurrency"])
	}
	c, err := prof.Configure(&DefaultConfig, p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.(*Config)
	if len(cfg.Sizes) != 1 || cfg.Sizes[0] != 100*MiB || cfg.MultipartThreshold < 100*MiB || cfg.MaxObjectsPerSize != 100 {
		t.Fatalf("configured: sizes %v, multipart threshold %s, max objects %d", cfg.Sizes, cfg.MultipartThreshold, cfg.MaxObjectsPerSize)
	}
	if DefaultConfig.Sizes[0] != 4*KiB {
		t.Fatal("Configure changed the target's own section")
	}
	st := prof.Stages(p)
	if len(st) != 2 || st[0].Name != "create" || st[0].Mix[0].Op != "put_100MiB" || st[1].Name != "read" || st[1].Workers != 100 {
		t.Fatalf("stages %+v", st)
	}
	q := probes.BenchParams{Workers: 8, Mix: []probes.Weighted{{Op: OpPut, Weight: 1}}}
	prof.Defaults(&q)
	if q.Int("concurrency") != 8 || len(prof.Stages(q)) != 1 {
		t.Fatalf("--workers 8 --mix put=1: concurrency %d, %d stages", q.Int("concurrency"), len(prof.Stages(q)))
	}
	if err := checkSinglePut("2GiB"); err == nil || !strings.Contains(err.Error(), "2GiB: an object size from 1B to 1GiB") {
		t.Errorf("2GiB accepted or unclear: %v", err)
	}
}

// The recycle profile keeps every prepared object and reads them in order.
func TestRecycleProfile(t *testing.T) {
	prof := recycleProfile()
	var p probes.BenchParams
	prof.Defaults(&p)
	c, err := prof.Configure(&DefaultConfig, p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.(*Config)
	if !cfg.recycle || cfg.MaxObjectsPerSize != 10000 || cfg.Sizes[0] != 4*KiB {
		t.Fatalf("configured: recycle %v, max objects %d, sizes %v", cfg.recycle, cfg.MaxObjectsPerSize, cfg.Sizes)
	}
	if st := prof.Stages(p); !st[0].Setup || st[0].MaxOps != 10000 || st[1].Name != "recycle" {
		t.Fatalf("stages %+v", st)
	}
}
