// Package calibrate measures a config's targets at their own canary rates
// and writes what it saw as a baseline file (internal/baseline): this store's
// p50/p90/p99 per target and op, the sample counts and the conditions, so
// `dbcanary generate rules|dashboards --baseline` derives alert thresholds
// from the operator's own stores instead of someone else's benchmark.
package calibrate

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/internal/hist"
	"github.com/dbcanary/dbcanary/probes"
)

// MinAlertSamples is the fewest samples a p99 is alerted on: below 100 the
// "p99" is the largest sample or two, not a percentile.
const MinAlertSamples = 100

// SourceID names the measurement in the file's sources.
const SourceID = "calibrate"

type key struct{ target, backend, op string }

type opRecord struct {
	latency *hist.Histogram            // every attempt, as the latency alerts count them
	phases  map[string]*hist.Histogram // successful ops only, as exported
	ok, bad uint64
	causes  map[string]uint64
}

// Recorder collects samples per target and op; safe for concurrent use.
type Recorder struct {
	backends map[string]string // target → backend
	mu       sync.Mutex
	ops      map[key]*opRecord
	n, bad   uint64
}

// NewRecorder records samples of cfg's targets.
func NewRecorder(cfg *config.Config) *Recorder {
	r := &Recorder{backends: map[string]string{}, ops: map[key]*opRecord{}}
	for _, t := range cfg.Targets {
		r.backends[t.Name] = t.Backend
	}
	return r
}

// Record is an engine.SampleFunc.
func (r *Recorder) Record(s engine.Sample) {
	k := key{s.Target, r.backends[s.Target], s.Op}
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.ops[k]
	if o == nil {
		o = &opRecord{latency: hist.New(hist.Precise), phases: map[string]*hist.Histogram{}, causes: map[string]uint64{}}
		r.ops[k] = o
	}
	r.n++
	o.latency.Record(s.End.Sub(s.Intended))
	if s.Err != nil {
		o.bad++
		r.bad++
		o.causes[string(probes.CauseOf(s.Err))]++
		return
	}
	o.ok++
	for _, p := range s.Phases {
		h := o.phases[p.Name]
		if h == nil {
			h = hist.New(hist.Precise)
			o.phases[p.Name] = h
		}
		h.Record(p.Duration)
	}
}

// Progress is the samples and failures so far.
func (r *Recorder) Progress() (samples, failures uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.bad
}

// Conditions of a calibration run, written into the baseline's source.
type Conditions struct {
	Started  time.Time
	Duration time.Duration
	Config   *config.Config
	Version  string // dbcanary's
	Host     string
	// Notes is the operator's own text (store versions, hardware, load).
	Notes string
}

// Options shape the written file.
type Options struct {
	// Base supplies policy and snap tolerance (nil: the shipped defaults).
	Base *baseline.File
	// Warning and Critical multiply a measured p99 into its thresholds.
	Warning, Critical float64
}

// DefaultWarning and DefaultCritical: a p99 over 5 minutes at twice this
// store's own p99 warns, at five times it pages. The documented figures use
// 1x and 3x because they were measured under full benchmark load; these
// were measured at the canary's own rate, so they are typical, not ceilings.
const (
	DefaultWarning  = 2
	DefaultCritical = 5
)

var idUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// Build turns the recorded samples into a validated baseline file.
func (r *Recorder) Build(c Conditions, opt Options) (*baseline.File, []string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &baseline.File{Factors: baseline.Factors{Warning: opt.Warning, Critical: opt.Critical}, SnapTolerance: 0.05}
	if opt.Base != nil {
		b.Policy, b.SnapTolerance = opt.Base.Policy, opt.Base.SnapTolerance
	} else {
		b.Policy = baseline.DefaultPolicy
	}
	b.Sources = []baseline.Source{{ID: SourceID, Document: "dbcanary calibrate (this file)", Conditions: c.describe()}}
	var warnings []string
	keys := slices.SortedFunc(maps.Keys(r.ops), func(a, b key) int {
		return strings.Compare(a.target+"\x00"+a.op, b.target+"\x00"+b.op)
	})
	rates := rateTable(c.Config)
	ids := map[string]bool{}
	for _, k := range keys {
		o := r.ops[k]
		n := o.ok + o.bad
		cond := fmt.Sprintf("target %s, %d samples (%d failed%s) at %s over %s", k.target, n, o.bad, causeList(o.causes), rates[k.target+"/"+k.op], c.Duration)
		if o.bad > 0 {
			warnings = append(warnings, fmt.Sprintf("%s %s: %d of %d ops failed (%s): calibrate on a healthy store, or these figures include the failures", k.target, k.op, o.bad, n, strings.TrimPrefix(causeList(o.causes), ": ")))
		}
		b.Figures = append(b.Figures, figures(k, "", o.latency, cond, ids, &warnings)...)
		for _, ph := range slices.Sorted(maps.Keys(o.phases)) {
			b.Figures = append(b.Figures, figures(k, ph, o.phases[ph], cond, ids, &warnings)...)
		}
	}
	if len(b.Figures) == 0 {
		return nil, warnings, fmt.Errorf("no sample was recorded: is any op enabled, and did the run last long enough for one?")
	}
	fixCritical(b)
	if err := b.Validate(); err != nil {
		return nil, warnings, fmt.Errorf("the measured baseline does not validate: %w", err)
	}
	if _, err := generate.Thresholds(b); err != nil {
		return nil, warnings, fmt.Errorf("no thresholds can be derived from the measured baseline: %w", err)
	}
	return b, warnings, nil
}

// figures are one histogram's p50, p90 (reference) and p99 (alert when the
// generator knows the op and there are enough samples).
func figures(k key, phase string, h *hist.Histogram, cond string, ids map[string]bool, warnings *[]string) []baseline.Figure {
	n := h.Count()
	if n == 0 {
		return nil
	}
	kind, what := baseline.KindLatency, k.op
	if phase != "" {
		kind, what = baseline.KindPhase, k.op+" "+phase
	}
	p50, p90, p99 := ms(h.Quantile(0.5)), ms(h.Quantile(0.9)), ms(h.Quantile(0.99))
	quoted := fmt.Sprintf("p50 %s / p90 %s / p99 %s ms over %d samples", fmtMS(p50), fmtMS(p90), fmtMS(p99), n)
	alert := baseline.UseAlert
	var note string
	switch {
	case !generate.KnownOp(k.backend, k.op, phase):
		alert, note = baseline.UseReference, "the rule generator has no latency rules for this op"
	case n < MinAlertSamples:
		alert, note = baseline.UseReference, fmt.Sprintf("only %d samples: a p99 needs at least %d to be alerted on (calibrate for longer)", n, MinAlertSamples)
		*warnings = append(*warnings, fmt.Sprintf("%s %s: %s", k.target, what, note))
	}
	id := idUnsafe.ReplaceAllString(strings.ToLower(strings.Join([]string{k.target, k.op, phase}, "-")), "-")
	id = strings.Trim(strings.ReplaceAll(id, "--", "-"), "-")
	for base, n := id, 2; ids[id]; n++ { // targets a.b and a-b read alike
		id = fmt.Sprintf("%s-%d", base, n)
	}
	ids[id] = true
	var out []baseline.Figure
	for _, s := range []struct {
		stat string
		v    float64
		use  string
	}{{"p50", p50, baseline.UseReference}, {"p90", p90, baseline.UseReference}, {"p99", p99, alert}} {
		f := baseline.Figure{ID: id + "-" + s.stat, Backend: k.backend, Ops: []string{k.op}, Kind: kind, Phase: phase, Stat: s.stat,
			Value: s.v, Unit: "ms", Quoted: quoted, Source: SourceID, Conditions: cond, Use: s.use,
			Targets: []string{k.target}, Samples: int(n)}
		if s.use == baseline.UseReference && s.stat == "p99" {
			f.Note = note
		}
		out = append(out, f)
	}
	return out
}

// fixCritical raises a figure's critical factor where both thresholds would
// snap onto the same bucket bound (a fast op: 0.4 ms × 2 and × 5 are both
// under the lowest bounds), so every alert figure yields two thresholds.
func fixCritical(b *baseline.File) {
	for i := range b.Figures {
		f := &b.Figures[i]
		if f.Use != baseline.UseAlert {
			continue
		}
		one := *b
		one.Figures = []baseline.Figure{*f}
		for try := 0; try < 30; try++ {
			if _, err := generate.Thresholds(&one); err == nil || !strings.Contains(err.Error(), "not above the warning") {
				break
			}
			fac := b.EffectiveFactors(*f)
			fac.Critical = math.Round(fac.Critical*1.25*100) / 100
			f.Factors = &fac
			one.Figures[0] = *f
		}
	}
}

func ms(d time.Duration) float64 {
	v := math.Round(float64(d)/1e3) / 1e3 // µs resolution
	return max(v, 0.001)
}

func fmtMS(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func causeList(c map[string]uint64) string {
	if len(c) == 0 {
		return ""
	}
	var s []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		s = append(s, fmt.Sprintf("%s %d", k, c[k]))
	}
	return ": " + strings.Join(s, ", ")
}

// rateTable is each target/op's configured rate, as text.
func rateTable(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, t := range cfg.Targets {
		var scheduled float64
		for _, op := range t.Resolved {
			if !op.Async {
				scheduled += op.Rate
			}
		}
		for _, op := range t.Resolved {
			if op.Async {
				out[t.Name+"/"+op.Name] = fmt.Sprintf("one per scheduled op (%g/s)", scheduled)
			} else {
				out[t.Name+"/"+op.Name] = fmt.Sprintf("%g ops/s", op.Rate)
			}
		}
	}
	return out
}

func (c Conditions) describe() string {
	var s strings.Builder
	fmt.Fprintf(&s, "Measured by dbcanary %s calibrate on %s from %s UTC for %s at the config's own rates",
		c.Version, c.Host, c.Started.UTC().Format("2006-01-02 15:04:05"), c.Duration)
	for _, t := range c.Config.Targets {
		var ops []string
		for _, op := range t.Resolved {
			if !op.Async {
				ops = append(ops, fmt.Sprintf("%s %g/s", op.Name, op.Rate))
			} else {
				ops = append(ops, op.Name+" (event-driven)")
			}
		}
		fmt.Fprintf(&s, "; %s (%s, max_in_flight %d, timeout %s): %s", t.Name, t.Backend, t.MaxInFlight, t.Timeout, strings.Join(ops, ", "))
	}
	s.WriteString(". Store versions: ")
	if c.Notes != "" {
		s.WriteString("see the operator's notes: " + c.Notes)
	} else {
		s.WriteString("not recorded (dbcanary cannot ask every store; pass them with --conditions)")
	}
	return s.String()
}

// Marshal renders the file with a header saying what it is and how to use it.
func Marshal(b *baseline.File, c Conditions, configFile string) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `# Measured by `+"`dbcanary calibrate --config.file %s --duration %s`"+` on %s UTC.
# Every figure is this store's own latency at the canary's normal rates, per
# target (targets:) and op: p50 and p90 are references, p99 is alerted on
# (warning at p99 x factors.warning, critical at p99 x factors.critical,
# snapped onto bucket bounds). Regenerate the alerts from it with
#   dbcanary generate rules --baseline THIS_FILE --out alerts/
#   dbcanary generate dashboards --baseline THIS_FILE --out dashboards/
# Re-measure after any change to the stores or to the canary's config.
`, configFile, c.Duration, c.Started.UTC().Format("2006-01-02 15:04"))
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if _, err := baseline.Parse(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("the written baseline does not load back: %w", err)
	}
	return buf.Bytes(), nil
}
