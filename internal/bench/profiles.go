package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/probes/cassandra"
	"github.com/dbcanary/dbcanary/probes/opensearch"
	"github.com/dbcanary/dbcanary/probes/rabbitmq"
	"github.com/dbcanary/dbcanary/probes/s3"
)

// Params are the command line's settings; zero values take the profile's
// defaults.
type Params struct {
	// Duration of each measured stage; Ops ends a stage after that many ops.
	Duration time.Duration
	Ops      int64
	// Warmup runs each stage this long first, unrecorded (nil: the profile's).
	Warmup *time.Duration
	// Workers is the concurrency of every stage (S3: see S3Workers).
	Workers int
	// Rate turns a stage into an open loop at this many ops/s (the search
	// stages of opensearch-pmc are open-loop by default); ClosedLoop (--rate
	// 0 given explicitly) makes them closed-loop too.
	Rate       float64
	ClosedLoop bool
	// Mix overrides the op weights (insert=1,read=4).
	Mix []engine.Weighted
	// Timeout overrides the op timeout.
	Timeout time.Duration

	Sizes     []s3.Size // s3-sizes: object sizes
	S3Workers []int     // s3-sizes: the worker counts to step through
	BulkSize  int       // opensearch-pmc: documents per bulk request
	Records   int       // ycsb-a: record_count
}

// stageSpec is a stage as a profile lays it out.
type stageSpec struct {
	engine.Stage
	// Name is the task name in the tables (index-append, mixed, ...).
	Name string
	// Group gathers stages into one table (an S3 object size).
	Group string
	// Setup stages (uploads before downloads) are reported, not compared.
	Setup  bool
	Warmup time.Duration
}

func (s stageSpec) mode() string {
	var m string
	if s.Rate > 0 {
		m = fmt.Sprintf("open loop at %g ops/s, %d workers", s.Rate, s.Workers)
	} else {
		m = fmt.Sprintf("closed loop, %d workers", s.Workers)
	}
	switch {
	case s.Duration > 0 && s.MaxOps > 0:
		m += fmt.Sprintf(", %s or %d ops", s.Duration, s.MaxOps)
	case s.Duration > 0:
		m += ", " + s.Duration.String()
	default:
		m += fmt.Sprintf(", %d ops", s.MaxOps)
	}
	if s.Warmup > 0 {
		m += fmt.Sprintf(" after a %s warm-up", s.Warmup)
	}
	return m
}

// Profile reproduces one reference benchmark run with the canary's probes.
type Profile struct {
	Name        string
	Backend     string
	Description string
	// Reproduces names the reference run and its document.
	Reproduces string
	// Sources are the baseline sources whose figures the tables compare with.
	Sources []string
	// totalRates: the sources' throughput figures are over all ops together.
	totalRates bool
	// defaults fills the parameters the command line left unset.
	defaults func(p *Params)
	// configure adjusts the target (a copy, with its probe section copied).
	configure func(t *config.Target, p Params) error
	stages    func(p Params) []stageSpec
	tables    func(r *Report, rf refs, p Params) []Table
	notes     func(p Params) []string
}

// Profiles lists every profile, by name.
func Profiles() []*Profile {
	return []*Profile{cassandraMixed(), ycsbA(), opensearchPMC(), rabbitmqPerfTest(), s3Sizes(), floor()}
}

// ProfileByName finds a profile.
func ProfileByName(name string) (*Profile, bool) {
	for _, p := range Profiles() {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// ParseMix reads "insert=1,read=4".
func ParseMix(s string) ([]engine.Weighted, error) {
	var mix []engine.Weighted
	for _, part := range strings.Split(s, ",") {
		op, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n < 1 || op == "" {
			return nil, fmt.Errorf("%q: want op=weight pairs with whole weights, e.g. insert=1,read=4", part)
		}
		mix = append(mix, engine.Weighted{Op: op, Weight: n})
	}
	return mix, nil
}

func mixString(mix []engine.Weighted) string {
	var s []string
	for _, w := range mix {
		s = append(s, fmt.Sprintf("%s=%d", w.Op, w.Weight))
	}
	return strings.Join(s, ",")
}

func warmupOr(p Params, d time.Duration) time.Duration {
	if p.Warmup != nil {
		return *p.Warmup
	}
	return d
}

func orInt(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// resolveOps makes every op of the (adjusted) probe section available to
// the stages, with the op timeout.
func resolveOps(t *config.Target, timeout time.Duration) {
	if timeout <= 0 {
		timeout = t.Timeout
	}
	t.Timeout = timeout
	t.Resolved = nil
	for _, s := range t.Probe.Ops() {
		t.Resolved = append(t.Resolved, config.Op{Name: s.Name, Rate: 1, Timeout: timeout, Async: s.Async, Phases: s.Phases})
	}
}

// --- cassandra-mixed: cassandra-stress user profile mixed_workload ---------

func cassandraMixed() *Profile {
	return &Profile{
		Name: "cassandra-mixed", Backend: "cassandra",
		Description: "cassandra-stress user profile=mixed_workload: insert (uuid key, blobs of 1..10000 and 1..100000 bytes), then ops(insert=1,read=4), 8 threads, every read compared byte for byte",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark Cassandra (cassandra-stress mixed_workload, threads=8, cl=ONE)",
		Sources:     []string{"ycsb"},
		totalRates:  true,
		defaults: func(p *Params) {
			p.Workers = orInt(p.Workers, 8)
			if p.Duration == 0 && p.Ops == 0 {
				p.Duration = 20 * time.Second
			}
			if len(p.Mix) == 0 {
				p.Mix = []engine.Weighted{{Op: cassandra.OpInsert, Weight: 1}, {Op: cassandra.OpRead, Weight: 4}}
			}
		},
		configure: func(t *config.Target, p Params) error {
			c, ok := t.Probe.(*cassandra.Config)
			if !ok {
				return fmt.Errorf("target %s is not a cassandra target", t.Name)
			}
			cp := *c
			cp.Profile = cassandra.ProfileMixed
			t.Probe = &cp
			resolveOps(t, p.Timeout)
			return nil
		},
		stages: func(p Params) []stageSpec {
			w := warmupOr(p, 3*time.Second)
			return []stageSpec{
				{Name: "insert", Stage: engine.Stage{Mix: []engine.Weighted{{Op: cassandra.OpInsert, Weight: 1}}, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops}, Warmup: w},
				{Name: "mixed", Stage: engine.Stage{Mix: p.Mix, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops}, Warmup: w},
			}
		},
		tables: func(r *Report, rf refs, p Params) []Table {
			return []Table{stressTable(r), summaryTable(r, rf, nil)}
		},
		notes: func(Params) []string {
			return []string{"The reference document shows its cassandra-stress results only as graphs; the figures compared are the nearest documented ones, YCSB workloada on ApsaraDB Cassandra (apsaradb-cassandra-ycsb.txt), measured with 100 threads at 80 % CPU."}
		},
	}
}

// --- ycsb-a: YCSB core workload A -----------------------------------------

func ycsbA() *Profile {
	return &Profile{
		Name: "ycsb-a", Backend: "cassandra",
		Description: "YCSB workloada: usertable rows of 10 fields x 100 bytes (1 KB), load, then read:update 95:5 at consistency ONE, every read compared field by field",
		Reproduces:  "apsaradb-cassandra-ycsb.txt (YCSB 0.15 workloada, 1 KB rows, read:write 95:5, CL=ONE)",
		Sources:     []string{"ycsb"},
		totalRates:  true,
		defaults: func(p *Params) {
			p.Workers = orInt(p.Workers, 8)
			p.Records = orInt(p.Records, 1000)
			if p.Duration == 0 && p.Ops == 0 {
				p.Duration = 20 * time.Second
			}
			if len(p.Mix) == 0 {
				p.Mix = []engine.Weighted{{Op: cassandra.OpRead, Weight: 95}, {Op: cassandra.OpUpdate, Weight: 5}}
			}
		},
		configure: func(t *config.Target, p Params) error {
			c, ok := t.Probe.(*cassandra.Config)
			if !ok {
				return fmt.Errorf("target %s is not a cassandra target", t.Name)
			}
			cp := *c
			cp.Profile = cassandra.ProfileYCSBA
			cp.YCSBA.RecordCount = p.Records
			cp.YCSBA.FieldLength = 100
			t.Probe = &cp
			resolveOps(t, p.Timeout)
			return nil
		},
		stages: func(p Params) []stageSpec {
			return []stageSpec{
				// YCSB's load phase writes recordcount rows; the canary's
				// update writes a whole row the first time it takes a record.
				{Name: "load", Stage: engine.Stage{Mix: []engine.Weighted{{Op: cassandra.OpUpdate, Weight: 1}}, Workers: p.Workers, MaxOps: int64(p.Records)}},
				{Name: "run", Stage: engine.Stage{Mix: p.Mix, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops}, Warmup: warmupOr(p, 3*time.Second)},
			}
		},
		tables: func(r *Report, rf refs, p Params) []Table {
			return []Table{ycsbTable(r, rf), summaryTable(r, rf, nil)}
		},
		notes: func(p Params) []string {
			return []string{fmt.Sprintf("The load stage takes records at random, so of %d update ops some rewrite a record already loaded; reads only ever read records this run wrote.", p.Records)}
		},
	}
}

// --- opensearch-pmc: opensearch-benchmark pmc --------------------------------

func opensearchPMC() *Profile {
	return &Profile{
		Name: "opensearch-pmc", Backend: "opensearch",
		Description: "opensearch-benchmark pmc: index-append (bulk), then the default (match_all), term and phrase searches at 20 ops/s; every search checked against the exact expected hits",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark OpenSearch (opensearch-benchmark --workload=pmc --pipeline=benchmark-only)",
		Sources:     []string{"james-db"},
		defaults: func(p *Params) {
			p.Workers = orInt(p.Workers, 8)
			p.BulkSize = orInt(p.BulkSize, 500)
			if p.Duration == 0 && p.Ops == 0 {
				p.Duration = 15 * time.Second
			}
			if p.Rate == 0 && !p.ClosedLoop {
				p.Rate = 20
			}
			if p.Timeout == 0 {
				p.Timeout = 60 * time.Second // the reference bulk p100 is 14.7 s
			}
		},
		configure: func(t *config.Target, p Params) error {
			c, ok := t.Probe.(*opensearch.Config)
			if !ok {
				return fmt.Errorf("target %s is not an opensearch target", t.Name)
			}
			cp := *c
			cp.BulkSize = p.BulkSize
			t.Probe = &cp
			resolveOps(t, p.Timeout)
			return nil
		},
		stages: func(p Params) []stageSpec {
			w := warmupOr(p, 2*time.Second)
			search := func(name, op string) stageSpec {
				return stageSpec{Name: name, Stage: engine.Stage{Mix: []engine.Weighted{{Op: op, Weight: 1}}, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops}, Warmup: w}
			}
			return []stageSpec{
				{Name: "index-append", Stage: engine.Stage{Mix: []engine.Weighted{{Op: opensearch.OpBulk, Weight: 1}}, Workers: p.Workers, Duration: p.Duration, MaxOps: p.Ops}, Warmup: w},
				search("default", opensearch.OpSearchAll),
				search("term", opensearch.OpSearchTerm),
				search("phrase", opensearch.OpSearchPhrase),
			}
		},
		tables: func(r *Report, rf refs, p Params) []Table {
			return []Table{summaryTable(r, rf, func(op string) (string, float64) {
				if op == opensearch.OpBulk {
					return "docs/s", float64(p.BulkSize)
				}
				return "ops/s", 1
			})}
		},
		notes: func(p Params) []string {
			return []string{fmt.Sprintf("index-append sends bulk requests of %d generated documents (body_words of the target's config) with %d clients; pmc's documents are full-text articles, larger than these.", p.BulkSize, p.Workers)}
		},
	}
}

// --- rabbitmq-perftest: PerfTestMulti, 2 producers, 4 consumers ---------------

func rabbitmqPerfTest() *Profile {
	return &Profile{
		Name: "rabbitmq-perftest", Backend: "rabbitmq",
		Description: "rabbitmq-perf-test: 2 publishers (persistent messages, publisher confirms), the probe's consumer reading them back, every body compared byte for byte",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark RabbitMQ (PerfTestMulti, producer-count 2, consumer-count 4, time-limit 30)",
		Sources:     []string{"james-db"},
		defaults: func(p *Params) {
			p.Workers = orInt(p.Workers, 2)
			if p.Duration == 0 && p.Ops == 0 {
				p.Duration = 30 * time.Second
			}
			if len(p.Mix) == 0 {
				p.Mix = []engine.Weighted{{Op: rabbitmq.OpPublish, Weight: 1}}
			}
		},
		configure: func(t *config.Target, p Params) error {
			c, ok := t.Probe.(*rabbitmq.Config)
			if !ok {
				return fmt.Errorf("target %s is not a rabbitmq target", t.Name)
			}
			cp := *c
			// No message may be dropped for length while the consumer catches up.
			cp.MaxLength = max(cp.MaxLength, 10_000_000)
			t.Probe = &cp
			resolveOps(t, p.Timeout)
			return nil
		},
		stages: func(p Params) []stageSpec {
			return []stageSpec{{Name: "perftest", Stage: engine.Stage{Mix: p.Mix, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops}, Warmup: warmupOr(p, 2*time.Second)}}
		},
		tables: func(r *Report, rf refs, p Params) []Table {
			return []Table{perfTestTable(r, rf), summaryTable(r, rf, func(string) (string, float64) { return "msg/s", 1 })}
		},
		notes: func(p Params) []string {
			return []string{"Each publisher waits for the broker's confirm of every message before the next (PerfTest --confirm 1 per producer); PerfTest without --confirm publishes unthrottled, which saturates a small broker. The probe reads its queue with one consumer: PerfTest's 4 consumers each had a queue of their own, so its receive rate counts every message four times."}
		},
	}
}

// --- s3-sizes: s3-benchmark over four object sizes and 8..16 threads ---------

func s3Sizes() *Profile {
	return &Profile{
		Name: "s3-sizes", Backend: "s3",
		Description: "s3-benchmark: upload objects of 4 KiB, 128 KiB, 1 MiB and 8 MiB, then download them with 8 to 16 threads, time to first and last byte, every byte compared",
		Reproduces:  "distributed-james-database-benchmarks.txt, Benchmark S3 storage (s3-benchmark, 4 KB / 128 KB / 1 MB / 8 MB, 8..16 threads)",
		Sources:     []string{"james-db"},
		defaults: func(p *Params) {
			if len(p.Sizes) == 0 {
				p.Sizes = []s3.Size{4 * s3.KiB, 128 * s3.KiB, s3.MiB, 8 * s3.MiB}
			}
			if len(p.S3Workers) == 0 {
				if p.Workers > 0 {
					p.S3Workers = []int{p.Workers}
				} else {
					p.S3Workers = []int{8, 9, 10, 11, 12, 13, 14, 15, 16}
				}
			}
			p.Workers = slices.Max(p.S3Workers)
			if p.Duration == 0 && p.Ops == 0 {
				p.Duration = 5 * time.Second
			}
			if p.Timeout == 0 {
				p.Timeout = 60 * time.Second
			}
			if len(p.Mix) == 0 {
				p.Mix = []engine.Weighted{{Op: s3.OpGet, Weight: 1}}
			}
		},
		configure: func(t *config.Target, p Params) error {
			c, ok := t.Probe.(*s3.Config)
			if !ok {
				return fmt.Errorf("target %s is not an s3 target", t.Name)
			}
			cp := *c
			cp.Sizes = p.Sizes
			// One object per worker, so no download waits for another's object.
			cp.MaxObjectsPerSize = min(max(p.Workers+2, cp.MaxObjectsPerSize), 100)
			t.Probe = &cp
			resolveOps(t, p.Timeout)
			return nil
		},
		stages: func(p Params) []stageSpec {
			var st []stageSpec
			for _, size := range p.Sizes {
				g := size.String()
				st = append(st, stageSpec{Name: "upload " + g, Group: g, Setup: true,
					Stage: engine.Stage{Mix: []engine.Weighted{{Op: s3.OpName(s3.OpPut, size), Weight: 1}}, Workers: min(p.Workers, 8), MaxOps: int64(p.Workers + 2)}})
				// --mix names op kinds (get=1, put=1): the ops of this size.
				var mix []engine.Weighted
				var kinds []string
				for _, w := range p.Mix {
					mix = append(mix, engine.Weighted{Op: s3.OpName(w.Op, size), Weight: w.Weight})
					kinds = append(kinds, w.Op)
				}
				for _, n := range p.S3Workers {
					st = append(st, stageSpec{Name: fmt.Sprintf("%s %s x%d", strings.Join(kinds, "+"), g, n), Group: g,
						Stage:  engine.Stage{Mix: mix, Workers: n, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops},
						Warmup: warmupOr(p, 0)})
				}
			}
			return st
		},
		tables: func(r *Report, rf refs, p Params) []Table {
			var out []Table
			for _, size := range p.Sizes {
				out = append(out, s3Table(r, rf, size))
			}
			return append(out, summaryTable(r, rf, nil))
		},
		notes: func(p Params) []string {
			return []string{"Throughput is MiB/s of object bodies read (s3-benchmark's MB/s). TTFB and TTLB count from each download's start (closed loop: when its worker took it)."}
		},
	}
}

// --- floor: the engine's own latency floor at canary rates -----------------

func floor() *Profile {
	return &Profile{
		Name: "floor", Backend: "noop",
		Description: "the measurement floor: the noop probe (no I/O) on an open-loop schedule at 10 ops/s, one worker; latency minus service time is the scheduler's own lateness",
		Reproduces:  "no reference document: what any figure of this machine includes before the store adds anything",
		defaults: func(p *Params) {
			p.Workers = orInt(p.Workers, 1)
			if p.Rate == 0 {
				p.Rate = 10
			}
			if p.Duration == 0 && p.Ops == 0 {
				p.Duration = 30 * time.Second
			}
		},
		configure: func(t *config.Target, p Params) error { resolveOps(t, p.Timeout); return nil },
		stages: func(p Params) []stageSpec {
			return []stageSpec{{Name: "floor", Stage: engine.Stage{Mix: []engine.Weighted{{Op: "noop", Weight: 1}}, Workers: p.Workers, Rate: p.Rate, Duration: p.Duration, MaxOps: p.Ops}, Warmup: warmupOr(p, time.Second)}}
		},
		tables: func(r *Report, rf refs, p Params) []Table { return []Table{floorTable(r), summaryTable(r, rf, nil)} },
		notes: func(Params) []string {
			return []string{"Latency counts from each op's slot in the schedule, service time from when the probe was called: the difference is how late the op started. The worker wakes for its slot itself, on a Go timer until 1.5 ms before it and in nanosleep (1 ns timer slack) for the rest, so it starts within tens of µs; a p99 in ms is the wait for a CPU on a loaded machine (see the load average)."}
		},
	}
}

// floorTable sets latency and service time side by side.
func floorTable(r *Report) Table {
	t := Table{ID: "floor", Title: "Measurement floor (µs): latency from the slot, service time from the call, and their difference",
		Header: []string{"Task", "Ops", "", "p50", "p90", "p99", "max"}, RightAlign: []bool{false, true, false, true, true, true, true}}
	us := func(v float64) string { return strconv.FormatFloat(v*1000, 'f', 0, 64) }
	for _, s := range measured(r) {
		for _, o := range s.Ops {
			l, sv := o.Latency, o.Service
			n := strconv.FormatUint(o.Count, 10)
			t.Rows = append(t.Rows,
				[]string{s.Name, n, "latency", us(l.P50), us(l.P90), us(l.P99), us(l.Max)},
				[]string{s.Name, n, "service time", us(sv.P50), us(sv.P90), us(sv.P99), us(sv.Max)},
				[]string{s.Name, n, "latency - service", us(l.P50 - sv.P50), us(l.P90 - sv.P90), us(l.P99 - sv.P99), "-"})
		}
	}
	return t
}
