package probes

import (
	"fmt"
	"strconv"
	"time"
)

// BenchProfile reproduces one reference benchmark run with the backend's
// probe, for `dbcanary bench --profile` (internal/bench runs it, records
// every op and prints the tables its Tables name). It is declared in the
// backend's record (Backend.Bench) as data and small functions of the
// parameters; the probe never imports the bench.
type BenchProfile struct {
	Name        string
	Description string
	// Reproduces names the reference run and its document.
	Reproduces string
	// Sources are the baseline sources whose figures the tables compare with.
	Sources []string
	// TotalRates: the sources' throughput figures are over all ops together,
	// so no single op's rate is compared with them.
	TotalRates bool
	// Verified says how the probe checks what it reads back, for the report.
	Verified string
	// Params are the profile's own settings (`dbcanary bench --param
	// name=value`), beside the common ones of BenchParams.
	Params []BenchParam
	// Defaults fills the parameters the command line left unset.
	Defaults func(p *BenchParams)
	// Configure returns the target's config section adjusted for the run;
	// c is the target's own, which it must not change (copy it). Nil: as
	// configured. Every op of the result is available to the stages.
	Configure func(c Config, p BenchParams) (Config, error)
	// Stages lays out the run, in order.
	Stages func(p BenchParams) []BenchStage
	// Tables are the result tables, in order, as the reference tools print them.
	Tables func(p BenchParams) []BenchTable
	// Notes are sentences printed under the tables (nil: none).
	Notes func(p BenchParams) []string
}

// BenchNoter is a probe with sentences for a bench report about the store it
// ran against: a server setting that shapes the figures (Cassandra's
// commitlog_sync). The bench asks once, after the last stage.
type BenchNoter interface {
	BenchNotes() []string
}

// BenchParams are the bench command line's settings; zero values take the
// profile's defaults (BenchProfile.Defaults).
type BenchParams struct {
	// Duration of each measured stage; Ops ends a stage after that many ops.
	Duration time.Duration
	Ops      int64
	// Warmup runs each stage this long first, unrecorded (nil: the profile's).
	Warmup *time.Duration
	// Workers is the concurrency of every stage (see also WorkerSteps).
	Workers int
	// Rate turns a stage into an open loop at this many ops/s; ClosedLoop
	// (--rate 0 given explicitly) asks for a closed loop where a profile
	// would default to an open one.
	Rate       float64
	ClosedLoop bool
	// Mix overrides the op weights (insert=1,read=4).
	Mix []Weighted
	// Timeout overrides the op timeout.
	Timeout time.Duration

	// Values are the profile's own parameters (BenchProfile.Params) by
	// name: the command line's, then the ones Defaults sets.
	Values map[string]string
}

// BenchParam is a setting of one profile: `dbcanary bench --param
// name=value` sets it after Check accepted the value; the profile's
// Defaults sets it when the command line did not (SetDefault).
type BenchParam struct {
	Name string
	// Help says what it sets and its default, in one line.
	Help string
	// Check validates a value from the command line (nil: any).
	Check func(value string) error
}

// SetDefault sets a profile parameter the command line left unset.
func (p *BenchParams) SetDefault(name, value string) {
	if p.Values == nil {
		p.Values = map[string]string{}
	}
	if _, ok := p.Values[name]; !ok {
		p.Values[name] = value
	}
}

// Int is a profile parameter as a whole number (0 when unset; Check
// rejected anything else).
func (p BenchParams) Int(name string) int {
	n, _ := strconv.Atoi(p.Values[name])
	return n
}

// PositiveInt is a BenchParam.Check: a whole number of at least 1.
func PositiveInt(v string) error {
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		return fmt.Errorf("%q is not a whole number of at least 1", v)
	}
	return nil
}

// DefaultDuration sets the stage duration to d when the run is bounded by
// neither --duration nor --ops.
func (p *BenchParams) DefaultDuration(d time.Duration) {
	if p.Duration == 0 && p.Ops == 0 {
		p.Duration = d
	}
}

// WarmupOr is the warm-up the command line asked for, else d.
func (p BenchParams) WarmupOr(d time.Duration) time.Duration {
	if p.Warmup != nil {
		return *p.Warmup
	}
	return d
}

// Weighted is one op of a mix and its weight.
type Weighted struct {
	Op     string
	Weight int
}

// BenchStage is one stage of a bench run: a mix of ops run by workers,
// closed-loop or at a rate, until Duration or MaxOps (whichever first).
type BenchStage struct {
	// Name is the task name in the tables (index-append, mixed, ...).
	Name string
	// Group gathers stages into one table (an object size).
	Group string
	// Setup stages (uploads before downloads) are reported, not compared.
	Setup    bool
	Mix      []Weighted
	Workers  int
	Rate     float64
	Duration time.Duration
	MaxOps   int64
	Warmup   time.Duration
}

// BenchLayout is the layout of a result table: the reference tool whose
// output it reproduces.
type BenchLayout string

// The tables a bench profile can print.
const (
	// LayoutSummary is opensearch-benchmark's result table (Metric | Task |
	// Value | Unit) for every stage and op, each figure beside its reference.
	LayoutSummary BenchLayout = "summary"
	// LayoutStress is cassandra-stress's per-op summary.
	LayoutStress BenchLayout = "stress"
	// LayoutYCSB is YCSB's load and run row (stages "load" and "run", ops
	// "update" and "read") beside the documented rows.
	LayoutYCSB BenchLayout = "ycsb"
	// LayoutPerfTest is rabbitmq-perf-test's summary of Send and Receive.
	LayoutPerfTest BenchLayout = "perftest"
	// LayoutDownloads is s3-benchmark's download table of one Group: Op's
	// throughput and its two Phases (first and last byte) per worker count,
	// with the Group's SetupOp in a note.
	LayoutDownloads BenchLayout = "downloads"
	// LayoutFloor sets latency and service time side by side.
	LayoutFloor BenchLayout = "floor"
)

// BenchTable is one result table of a bench profile.
type BenchTable struct {
	Layout BenchLayout
	// ID names the table in the JSON report (empty: the layout's name).
	ID string
	// UnitOf (LayoutSummary) gives an op's throughput unit and the
	// documents one op moves (nil: ops/s).
	UnitOf func(op string) (unit string, perOp float64)
	// Send and Receive (LayoutPerfTest) are the publishing and consuming ops.
	Send, Receive string
	// Group, Op, SetupOp and Phases: see LayoutDownloads.
	Group, Op, SetupOp string
	Phases             [2]string
	// Note ends the table's notes.
	Note string
}
