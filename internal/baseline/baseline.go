// Package baseline loads the documented reference figures (baselines/*.yaml)
// that dbcanary's alert thresholds and dashboard lines are derived from. Each
// figure keeps its source document and test conditions next to its number.
package baseline

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// File is a baseline data file.
type File struct {
	// Factors turn a figure into alert thresholds (figure × factor).
	Factors Factors `yaml:"factors"`
	// SnapTolerance is how far (relative) a threshold may move down to the
	// nearest classic bucket bound; beyond it the threshold moves up instead.
	SnapTolerance float64 `yaml:"snap_tolerance"`
	// Buckets are classic bucket bounds, in seconds, that the op histograms
	// add to their ladder (metrics.LatencyBuckets), so that a threshold
	// lands on its figure instead of the next bound up. The daemon's are
	// those of the shipped file (baselines/james-reference.yaml, compiled in).
	Buckets []float64 `yaml:"buckets,omitempty"`
	// Policy holds the thresholds that are choices, not measurements.
	Policy  Policy   `yaml:"policy"`
	Sources []Source `yaml:"sources"`
	Figures []Figure `yaml:"figures"`
}

// Factors multiply a figure into the warning and critical thresholds.
type Factors struct {
	Warning  float64 `yaml:"warning"`
	Critical float64 `yaml:"critical"`
}

// Policy is what the operator decides rather than what a benchmark measured.
type Policy struct {
	// SLOObjective is the availability objective (fraction of ops that succeed).
	SLOObjective float64 `yaml:"slo_objective"`
	// ErrorRatioWarning is the 5m per-op error ratio that warns.
	ErrorRatioWarning float64 `yaml:"error_ratio_warning"`
	// StaleAfter is how long an op may go without a success.
	StaleAfter model.Duration `yaml:"stale_after"`
	// DriftFactor: p99 over 1h above this many times the same hour a day earlier warns...
	DriftFactor float64 `yaml:"drift_factor"`
	// ...once it is also above DriftMinSeconds (below that, drift is noise).
	DriftMinSeconds float64 `yaml:"drift_min_seconds"`
	// Job is the Prometheus scrape job name of dbcanary.
	Job string `yaml:"job"`
	// StaleIntervals: an op is also not stale before this many of its own
	// intervals (1 / dbcanary_op_expected_rate) have passed without a success.
	StaleIntervals float64 `yaml:"stale_intervals"`
	// ErrorMinFailures: the per-op error-ratio alert needs at least this many
	// failures in its window (at low rates two failures are a large ratio).
	ErrorMinFailures int `yaml:"error_min_failures"`
	// MinSlowSamples: a latency alert needs at least this many samples above
	// its threshold in the window (one slow sample is not a trend).
	MinSlowSamples int `yaml:"min_slow_samples"`
	// AggregateBy are labels every rule keeps besides the canary's own
	// (target, backend, op, ...): the external or target labels that tell
	// one Prometheus, cluster or vantage point from another in a global
	// view (e.g. [cluster]). Empty keeps only the canary's labels.
	AggregateBy []string `yaml:"aggregate_by"`
	// OpTimeouts are the op timeouts the latency rules are generated for,
	// by "backend/op" or "backend" (absent: the config's default timeout).
	// A threshold at or above its op's timeout can never be crossed (the
	// op fails as a timeout first): the generator leaves it out and says so.
	OpTimeouts map[string]model.Duration `yaml:"op_timeouts"`
	// CertExpiryWarning and CertExpiryCritical: how long before the first
	// certificate a store presents expires the TLS alert warns and pages
	// (absent: DefaultCertExpiryWarning and DefaultCertExpiryCritical).
	CertExpiryWarning  model.Duration `yaml:"cert_expiry_warning"`
	CertExpiryCritical model.Duration `yaml:"cert_expiry_critical"`
}

// The certificate expiry thresholds when a baseline sets none (the usual
// mixin defaults: a ticket three weeks ahead, a page one week ahead).
const (
	DefaultCertExpiryWarning  = 21 * 24 * time.Hour
	DefaultCertExpiryCritical = 7 * 24 * time.Hour
)

// DefaultPolicy is the policy of a baseline file that sets none, and of each
// key a file's policy leaves out: Parse decodes the file over it. Its values
// are the shipped baseline's (baselines/james-reference.yaml).
var DefaultPolicy = Policy{
	SLOObjective:       0.999,
	ErrorRatioWarning:  0.05,
	StaleAfter:         model.Duration(5 * time.Minute),
	DriftFactor:        2,
	DriftMinSeconds:    0.005,
	Job:                "dbcanary",
	StaleIntervals:     3,
	ErrorMinFailures:   5,
	MinSlowSamples:     2,
	CertExpiryWarning:  model.Duration(DefaultCertExpiryWarning),
	CertExpiryCritical: model.Duration(DefaultCertExpiryCritical),
}

// CertExpiry returns the warning and critical certificate expiry thresholds.
func (p Policy) CertExpiry() (warning, critical time.Duration) {
	warning, critical = time.Duration(p.CertExpiryWarning), time.Duration(p.CertExpiryCritical)
	if warning == 0 {
		warning = DefaultCertExpiryWarning
	}
	if critical == 0 {
		critical = DefaultCertExpiryCritical
	}
	return warning, critical
}

// Source is a reference document.
type Source struct {
	ID         string `yaml:"id"`
	Document   string `yaml:"document"`
	Conditions string `yaml:"conditions"`
}

// Figure is one documented number mapped to canary ops.
type Figure struct {
	ID      string   `yaml:"id"`
	Backend string   `yaml:"backend"`
	Ops     []string `yaml:"ops"`
	// Kind is latency (dbcanary_op_latency_seconds), phase
	// (dbcanary_op_phase_seconds{phase}) or throughput (reference only).
	Kind  string `yaml:"kind"`
	Phase string `yaml:"phase,omitempty"`
	// Stat is the statistic: p50, p90, p95, p99, p99.9, mean or rate.
	Stat  string  `yaml:"stat"`
	Value float64 `yaml:"value"`
	// Unit of Value: us, ms, s for latency; ops/s, msg/s, docs/s, MB/s for throughput.
	Unit string `yaml:"unit"`
	// Quoted is the figure exactly as BASELINES.md prints it (ranges included).
	Quoted     string `yaml:"quoted"`
	Source     string `yaml:"source"`
	Conditions string `yaml:"conditions"`
	// Use is alert (thresholds are generated) or reference (dashboards and docs only).
	Use string `yaml:"use"`
	// Factors override the file's factors for this figure.
	Factors *Factors `yaml:"factors,omitempty"`
	// Note says how the figure maps onto the canary op.
	Note string `yaml:"note,omitempty"`
	// Targets limits the figure to these targets (config target names): a
	// figure measured on one store (`dbcanary calibrate`). Empty: every
	// target of the backend. For a target it names, it replaces a figure of
	// the same backend, op, phase and stat that names no target.
	Targets []string `yaml:"targets,omitempty"`
	// Samples is how many samples a measured figure was computed from.
	Samples int `yaml:"samples,omitempty"`
}

// Kinds, uses and stats.
const (
	KindLatency    = "latency"
	KindPhase      = "phase"
	KindThroughput = "throughput"
	UseAlert       = "alert"
	UseReference   = "reference"
)

var (
	latencyUnits    = map[string]float64{"us": 1e-6, "ms": 1e-3, "s": 1}
	throughputUnits = []string{"ops/s", "msg/s", "docs/s", "MB/s"}
	nameRE          = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	labelRE         = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	opRE            = regexp.MustCompile(`^[a-z][A-Za-z0-9_]*$`)
	// targetRE is the config's target name syntax.
	targetRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
)

// Seconds is a latency figure's value in seconds.
func (f Figure) Seconds() float64 { return f.Value * latencyUnits[f.Unit] }

// Quantile is the stat as a quantile (p99 → 0.99), ok false for mean and rate.
func (f Figure) Quantile() (float64, bool) {
	if !strings.HasPrefix(f.Stat, "p") {
		return 0, false
	}
	v, err := strconv.ParseFloat(f.Stat[1:], 64)
	if err != nil {
		return 0, false
	}
	return v / 100, true
}

// EffectiveFactors are the figure's own factors or else the file's.
func (b *File) EffectiveFactors(f Figure) Factors {
	if f.Factors != nil {
		return *f.Factors
	}
	return b.Factors
}

// Source returns a source by id.
func (b *File) Source(id string) Source {
	for _, s := range b.Sources {
		if s.ID == id {
			return s
		}
	}
	return Source{}
}

// Load reads and validates a baseline file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// Parse decodes strictly (unknown keys are errors) and validates.
func Parse(data []byte) (*File, error) {
	b := File{Policy: DefaultPolicy}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Validate reports every problem, each
// prefixed by its path in the file, section by section, joined
// (errors.Join: one per line); nil when there is none.
func (b *File) Validate() error {
	var p problems
	p.factors("factors", b.Factors)
	if b.SnapTolerance < 0 || b.SnapTolerance > 0.2 {
		p.bad("snap_tolerance", "must be between 0 and 0.2, got %g", b.SnapTolerance)
	}
	for i, x := range b.Buckets {
		if !(x > 0 && x <= 3600) || slices.Contains(b.Buckets[:i], x) {
			p.bad(fmt.Sprintf("buckets[%d]", i), "must be a bound in seconds above 0 and at most 3600, listed once, got %g", x)
		}
	}
	b.Policy.validate(&p)
	sources := validateSources(b.Sources, &p)
	validateFigures(b.Figures, sources, &p)
	return errors.Join(p...)
}

// problems collects Validate's problems, each prefixed by its path.
type problems []error

func (p *problems) bad(path, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

func (p *problems) factors(path string, f Factors) {
	if f.Warning < 1 {
		p.bad(path+".warning", "must be at least 1 (a figure measured under load is a ceiling), got %g", f.Warning)
	}
	if f.Critical <= f.Warning {
		p.bad(path+".critical", "must be above warning (%g), got %g", f.Warning, f.Critical)
	}
}

func (p Policy) validate(errs *problems) {
	bad := errs.bad
	if p.SLOObjective <= 0.9 || p.SLOObjective >= 1 {
		bad("policy.slo_objective", "must be in (0.9, 1), got %g", p.SLOObjective)
	} else if 14.4*(1-p.SLOObjective) >= 1 {
		bad("policy.slo_objective", "%g leaves an error budget so large that a 14.4x burn exceeds 100 %% errors", p.SLOObjective)
	}
	if p.ErrorRatioWarning <= 0 || p.ErrorRatioWarning >= 1 {
		bad("policy.error_ratio_warning", "must be in (0, 1), got %g", p.ErrorRatioWarning)
	}
	if time.Duration(p.StaleAfter) < time.Minute {
		bad("policy.stale_after", "must be at least 1m, got %s", p.StaleAfter)
	}
	if p.StaleIntervals < 2 {
		bad("policy.stale_intervals", "must be at least 2 (a success may come late by one interval), got %g", p.StaleIntervals)
	}
	if p.ErrorMinFailures < 1 {
		bad("policy.error_min_failures", "must be at least 1, got %d", p.ErrorMinFailures)
	}
	if p.MinSlowSamples < 1 {
		bad("policy.min_slow_samples", "must be at least 1, got %d", p.MinSlowSamples)
	}
	if p.DriftFactor <= 1 {
		bad("policy.drift_factor", "must be above 1, got %g", p.DriftFactor)
	}
	if p.DriftMinSeconds < 0 {
		bad("policy.drift_min_seconds", "must not be negative, got %g", p.DriftMinSeconds)
	}
	if p.CertExpiryWarning < 0 || p.CertExpiryCritical < 0 {
		bad("policy.cert_expiry_warning", "cert_expiry_warning and cert_expiry_critical must not be negative")
	} else if w, c := p.CertExpiry(); w <= c {
		bad("policy.cert_expiry_warning", "must be longer than cert_expiry_critical (%s), got %s", model.Duration(c), model.Duration(w))
	}
	reserved := []string{"target", "backend", "op", "phase", "cause", "result", "direction", "quantile", "le", "age", "figure", "severity", "window", "__name__"}
	for i, l := range p.AggregateBy {
		switch {
		case !labelRE.MatchString(l):
			bad(fmt.Sprintf("policy.aggregate_by[%d]", i), "must be a Prometheus label name, got %q", l)
		case slices.Contains(reserved, l):
			bad(fmt.Sprintf("policy.aggregate_by[%d]", i), "%q is one of the canary's own labels, always kept or set by the rules", l)
		case slices.Contains(p.AggregateBy[:i], l):
			bad(fmt.Sprintf("policy.aggregate_by[%d]", i), "duplicate %q", l)
		}
	}
	for k, d := range p.OpTimeouts {
		if d <= 0 {
			bad("policy.op_timeouts."+k, "must be positive, got %s", d)
		}
		be, op, _ := strings.Cut(k, "/")
		if !nameRE.MatchString(be) || strings.Contains(op, "/") {
			bad("policy.op_timeouts."+k, `key must be "backend" or "backend/op"`)
		}
	}
	if !nameRE.MatchString(p.Job) {
		bad("policy.job", "must be a Prometheus job name like dbcanary, got %q", p.Job)
	}
}

// validateSources checks the sources and returns their ids.
func validateSources(list []Source, p *problems) map[string]bool {
	bad := p.bad
	sources := map[string]bool{}
	for i, s := range list {
		path := fmt.Sprintf("sources[%d]", i)
		switch {
		case s.ID == "":
			bad(path+".id", "missing")
		case sources[s.ID]:
			bad(path+".id", "duplicate %q", s.ID)
		}
		sources[s.ID] = true
		if s.Document == "" {
			bad(path+".document", "missing: name the reference document")
		}
		if s.Conditions == "" {
			bad(path+".conditions", "missing: state the test conditions")
		}
	}
	return sources
}

// validateFigures checks the figures against each other and the sources.
func validateFigures(figures []Figure, sources map[string]bool, p *problems) {
	bad := p.bad
	ids := map[string]bool{}
	alerted := map[string]string{} // backend/op/phase/stat[/target] → figure id: one alert figure each
	for i, f := range figures {
		path := fmt.Sprintf("figures[%d]", i)
		if f.ID != "" {
			path = fmt.Sprintf("figures[%d](%s)", i, f.ID)
		}
		switch {
		case f.ID == "":
			bad(path+".id", "missing")
		case ids[f.ID]:
			bad(path+".id", "duplicate %q", f.ID)
		}
		ids[f.ID] = true
		validateFigureFields(f, path, sources, p)
		switch f.Kind {
		case KindLatency, KindPhase:
			validateLatencyFigure(f, path, alerted, p)
		case KindThroughput:
			validateThroughputFigure(f, path, p)
		default:
			bad(path+".kind", "must be latency, phase or throughput, got %q", f.Kind)
		}
	}
}

// validateFigureFields checks what every figure has, whatever its kind.
func validateFigureFields(f Figure, path string, sources map[string]bool, p *problems) {
	bad := p.bad
	if !nameRE.MatchString(f.Backend) {
		bad(path+".backend", "must be a backend name like rabbitmq, got %q", f.Backend)
	}
	if len(f.Ops) == 0 {
		bad(path+".ops", "missing: list the canary ops the figure applies to")
	}
	for j, op := range f.Ops {
		if !opRE.MatchString(op) {
			bad(fmt.Sprintf("%s.ops[%d]", path, j), "not an op name: %q", op)
		}
	}
	if !sources[f.Source] {
		bad(path+".source", "unknown source %q (define it under sources)", f.Source)
	}
	if f.Conditions == "" {
		bad(path+".conditions", "missing: state the test conditions of this figure")
	}
	if f.Quoted == "" {
		bad(path+".quoted", "missing: quote the figure as the reference prints it")
	}
	if !(f.Value > 0) || math.IsInf(f.Value, 0) {
		bad(path+".value", "must be a positive number, got %g", f.Value)
	}
	if f.Use != UseAlert && f.Use != UseReference {
		bad(path+".use", "must be alert or reference, got %q", f.Use)
	}
	if f.Factors != nil {
		p.factors(path+".factors", *f.Factors)
	}
	for j, t := range f.Targets {
		switch {
		case !targetRE.MatchString(t):
			bad(fmt.Sprintf("%s.targets[%d]", path, j), "not a target name: %q", t)
		case slices.Index(f.Targets, t) < j:
			bad(fmt.Sprintf("%s.targets[%d]", path, j), "duplicate %q", t)
		}
	}
	if f.Samples < 0 {
		bad(path+".samples", "must not be negative, got %d", f.Samples)
	}
}

// validateLatencyFigure checks a latency or phase figure; alerted maps each
// backend/op/phase/stat[/target] already alerted on to its figure's id.
func validateLatencyFigure(f Figure, path string, alerted map[string]string, p *problems) {
	bad := p.bad
	if _, ok := latencyUnits[f.Unit]; !ok {
		bad(path+".unit", "a latency is in us, ms or s, got %q", f.Unit)
	}
	q, isQ := f.Quantile()
	if f.Stat != "mean" && (!isQ || q <= 0 || q >= 1) {
		bad(path+".stat", "a latency stat is mean or pNN (p50, p99, p99.9), got %q", f.Stat)
	}
	if f.Kind == KindPhase && !nameRE.MatchString(f.Phase) {
		bad(path+".phase", "a phase figure names its phase (first_byte, last_byte), got %q", f.Phase)
	}
	if f.Kind == KindLatency && f.Phase != "" {
		bad(path+".phase", "only phase figures have a phase")
	}
	if f.Use != UseAlert {
		return
	}
	if !isQ {
		bad(path+".use", "only a quantile can be alerted on (histogram_quantile), not %q", f.Stat)
	}
	targets := f.Targets
	if len(targets) == 0 {
		targets = []string{""}
	}
	for _, op := range f.Ops {
		for _, t := range targets {
			key := strings.Join([]string{f.Backend, op, f.Phase, f.Stat, t}, "/")
			if other, dup := alerted[key]; dup {
				on := ""
				if t != "" {
					on = " on target " + t
				}
				bad(path+".ops", "%s %s %s%s is already alerted on by figure %s", f.Backend, op, f.Stat, on, other)
			}
			alerted[key] = f.ID
		}
	}
}

// validateThroughputFigure checks a throughput figure: reference only.
func validateThroughputFigure(f Figure, path string, p *problems) {
	bad := p.bad
	if !slices.Contains(throughputUnits, f.Unit) {
		bad(path+".unit", "a throughput is in %s, got %q", strings.Join(throughputUnits, ", "), f.Unit)
	}
	if f.Stat != "rate" {
		bad(path+".stat", "a throughput stat is rate, got %q", f.Stat)
	}
	if f.Use != UseReference {
		bad(path+".use", "a throughput is reference only: the canary's own rate is set by its config")
	}
}
