package cassandra

import (
	"slices"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// Rama's shapes: 1000 writes in flight are 10 workers of 100-row batches;
// 1000 read/write pairs are 2000 workers.
func TestRamaProfilesShape(t *testing.T) {
	var p probes.BenchParams
	maxWriteProfile().Defaults(&p)
	if p.Workers != 10 || p.Int("batch") != 100 {
		t.Fatalf("maxwrite: %d workers, batch %d", p.Workers, p.Int("batch"))
	}
	c, err := maxWriteProfile().Configure(&DefaultConfig, p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.(*Config)
	if cfg.Profile != profileKV || cfg.kv.Batch != 100 || cfg.RequestTimeout < p.Timeout {
		t.Fatalf("maxwrite config: profile %s, batch %d, request timeout %s (op timeout %s)", cfg.Profile, cfg.kv.Batch, cfg.RequestTimeout, p.Timeout)
	}
	if ops := cfg.opNames(); len(ops) != 3 || ops[0] != OpBatchInsert {
		t.Fatalf("kv ops %v", ops)
	}
	var q probes.BenchParams
	readWriteProfile().Defaults(&q)
	if q.Workers != 2000 || q.Int("rows") != 100000 {
		t.Fatalf("readwrite: %d workers, %d rows", q.Workers, q.Int("rows"))
	}
}

// Recycle reads go round the acknowledged prepared keys in order; random
// reads cover twice the prepared space (half never written).
func TestKVPick(t *testing.T) {
	p := &Probe{cfg: Config{kv: kvConfig{Rows: 4, Recycle: true}}}
	p.kv = newKVState(4)
	if _, ok := p.kvPick(); ok {
		t.Fatal("picked a key before any was written")
	}
	for _, n := range []int64{0, 1, 3} {
		p.kv.ack(n)
	}
	var got []int64
	for range 5 {
		k, _ := p.kvPick()
		got = append(got, k)
	}
	if want := []int64{0, 2, 6, 0, 2}; !slices.Equal(got, want) {
		t.Fatalf("recycle keys %v, want %v (key 4 never acknowledged)", got, want)
	}
	p.cfg.kv.Recycle = false
	for range 100 {
		if k, _ := p.kvPick(); k < 0 || k >= 8 {
			t.Fatalf("random key %d outside [0, 8)", k)
		}
	}
}
