package cassandra

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// ramaDoc is the reference document of the Rama profiles.
const ramaDoc = "rama-vs-mongodb-cassandra.txt"

// kvProfile is the target's section running the kv table with k, its
// request timeout at least the op timeout (1000 writes in flight queue).
func kvProfile(c probes.Config, p probes.BenchParams, k kvConfig) (probes.Config, error) {
	return withProfile(c, func(cp *Config) {
		cp.Profile = profileKV
		cp.kv = k
		cp.RequestTimeout = max(cp.RequestTimeout, p.Timeout)
	})
}

// writesPerOp is a LayoutSummary UnitOf: a batch_insert moves batch writes.
func writesPerOp(batch int) func(string) (string, float64) {
	return func(op string) (string, float64) {
		if op == OpBatchInsert {
			return "writes/s", float64(batch)
		}
		return "ops/s", 1
	}
}

// inFlight is the writes-in-flight parameter of the Rama profiles.
var inFlight = probes.BenchParam{Name: "in-flight", Help: "writes (cassandra-maxwrite) or read/write pairs (cassandra-readwrite) in flight (default 1000)", Check: probes.PositiveInt}

// maxWriteProfile is Rama's max write throughput benchmark against Cassandra.
func maxWriteProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "cassandra-maxwrite",
		Description: "Rama max write throughput: unlogged batches of 100 rows of random UUIDs (pk, ck, value text), 1000 writes in flight, as fast as the node acknowledges",
		Reproduces:  ramaDoc + ", Max write throughput benchmark (batches of 100 writes, 1000 in flight, commitlog_sync periodic and batch)",
		Params:      []probes.BenchParam{{Name: "batch", Help: "rows per batch (default 100)", Check: probes.PositiveInt}, inFlight},
		Defaults: func(p *probes.BenchParams) {
			p.SetDefault("batch", "100")
			p.SetDefault("in-flight", "1000")
			// gocql has no callback API: a request in flight is a goroutine
			// waiting on its stream, so in-flight/batch workers keep that
			// many writes in flight, like Rama's semaphore.
			p.Workers = cmp.Or(p.Workers, max(1, p.Int("in-flight")/p.Int("batch")))
			p.DefaultDuration(20 * time.Second)
			p.Timeout = cmp.Or(p.Timeout, 30*time.Second)
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			return kvProfile(c, p, kvConfig{Batch: p.Int("batch"), Rows: 1})
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			return []probes.BenchStage{{Name: "write", Mix: []probes.Weighted{{Op: OpBatchInsert, Weight: 1}}, Workers: p.Workers, Rate: p.Rate,
				Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(3 * time.Second)}}
		},
		Tables: func(p probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutSummary, UnitOf: writesPerOp(p.Int("batch"))}}
		},
		Notes: func(p probes.BenchParams) []string {
			return []string{fmt.Sprintf("%d workers each keep one batch of %d rows in flight (%d writes). Nothing is read back: the durability ledger shows what an acknowledged write is worth under each commitlog_sync.", p.Workers, p.Int("batch"), p.Workers*p.Int("batch")),
				"Rama's published figures (one m6gd.large node, charts only): Rama 2.5x Cassandra with commitlog_sync batch, and only a little below Cassandra with periodic, so Cassandra batch/periodic is about 0.4. test/bench/rama-cassandra.sh runs this profile against a node of each mode and prints our ratio."}
		},
	}
}

// readWriteProfile is Rama's mixed read/write benchmark against Cassandra.
func readWriteProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "cassandra-readwrite",
		Description: "Rama mixed read/write: load rows 0, 2, 4, ... (pk, ck, value the id as text), then 50 % single-row writes continuing the ids and 50 % reads of random ids, half of them never written, 1000 read/write pairs in flight",
		Reproduces:  ramaDoc + ", Mixed read/write throughput benchmark (250M rows loaded, 50 % reads of which half miss, 1000 pairs in flight)",
		Verified:    "a written id holds its own value, an id never written comes back empty",
		Params:      []probes.BenchParam{{Name: "rows", Help: "rows loaded before the mixed stage (default 100000; Rama: 250M)", Check: probes.PositiveInt}, inFlight},
		Defaults: func(p *probes.BenchParams) {
			p.SetDefault("rows", "100000")
			p.SetDefault("in-flight", "1000")
			p.Workers = cmp.Or(p.Workers, 2*p.Int("in-flight"))
			p.DefaultDuration(20 * time.Second)
			p.Timeout = cmp.Or(p.Timeout, 30*time.Second)
			if len(p.Mix) == 0 {
				p.Mix = []probes.Weighted{{Op: OpInsert, Weight: 1}, {Op: OpRead, Weight: 1}}
			}
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			return kvProfile(c, p, kvConfig{Batch: 1, Rows: p.Int("rows")})
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			return []probes.BenchStage{
				{Name: "load", Setup: true, Mix: []probes.Weighted{{Op: OpInsert, Weight: 1}}, Workers: min(p.Workers, 64), MaxOps: int64(p.Int("rows"))},
				{Name: "mixed", Mix: p.Mix, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(3 * time.Second)},
			}
		},
		Tables: func(probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutSummary}}
		},
		Notes: func(p probes.BenchParams) []string {
			return []string{fmt.Sprintf("%d rows loaded (Rama: 250M, so its reads came from disk; ours mostly from memory). Reads pick ids in [0, %d): even ones were loaded, odd ones never are.", p.Int("rows"), 2*p.Int("rows")),
				"Rama's published figures (charts only): Cassandra with commitlog_sync periodic a little below Cassandra with batch (batch/periodic a little above 1), Rama more than 2.5x either."}
		},
	}
}

// recycleProfile is Mongoose's recycle mode on Cassandra rows.
func recycleProfile() probes.BenchProfile {
	return probes.BenchProfile{
		Name:        "cassandra-recycle",
		Description: "Mongoose recycle mode: write 10 000 rows once, then read them again and again in order, every value compared",
		Reproduces:  "mongoose-v3.5-performance.txt, 1.2.4 Recycle Mode (read 10K prepared items again and again)",
		Verified:    "every row holds the value written",
		Params:      []probes.BenchParam{{Name: "items", Help: "rows in the prepared set (default 10000)", Check: probes.PositiveInt}},
		Defaults: func(p *probes.BenchParams) {
			p.SetDefault("items", "10000")
			p.Workers = cmp.Or(p.Workers, 8)
			p.DefaultDuration(20 * time.Second)
			// Also bounds creating the kv table, slow on a loaded node.
			p.Timeout = cmp.Or(p.Timeout, 30*time.Second)
		},
		Configure: func(c probes.Config, p probes.BenchParams) (probes.Config, error) {
			return kvProfile(c, p, kvConfig{Batch: 1, Rows: p.Int("items"), Recycle: true})
		},
		Stages: func(p probes.BenchParams) []probes.BenchStage {
			return []probes.BenchStage{
				{Name: "prepare", Setup: true, Mix: []probes.Weighted{{Op: OpInsert, Weight: 1}}, Workers: max(p.Workers, 32), MaxOps: int64(p.Int("items"))},
				{Name: "recycle", Mix: []probes.Weighted{{Op: OpRead, Weight: 1}}, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops, Warmup: p.WarmupOr(2 * time.Second)},
			}
		},
		Tables: func(probes.BenchParams) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutSummary}}
		},
		Notes: func(p probes.BenchParams) []string {
			return []string{fmt.Sprintf("The prepare stage writes %d rows once; the recycle stage reads them in order, round the set. The reference shows its figures only as a graph, measured with Mongoose's dummy driver (no storage): there is no figure to compare with.", p.Int("items"))}
		},
	}
}

// BenchNotes implements probes.BenchNoter: the commit log mode of the node
// that answered, which decides the Rama profiles' figures.
func (p *Probe) BenchNotes() []string {
	if p.kv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := p.session(ctx)
	if err != nil {
		return []string{"commitlog_sync of the node: unknown (" + err.Error() + ")"}
	}
	var mode string
	if err := s.Query(`SELECT value FROM system_views.settings WHERE name = 'commitlog_sync'`).ScanContext(ctx, &mode); err != nil {
		return []string{"commitlog_sync of the node: unknown (system_views.settings: " + err.Error() + ")"}
	}
	return []string{"commitlog_sync of the node that answered: " + mode}
}
