package bench

import (
	"slices"

	"github.com/dbcanary/dbcanary/internal/baseline"
)

// Verdicts: a latency within its reference is at or below it; a throughput
// within its reference is at or above it.
const (
	VerdictWithin = "within"
	VerdictBeyond = "beyond"
	VerdictBelow  = "below"
)

// refs finds reference figures of the profile's sources in a baseline file.
type refs struct {
	b       *baseline.File
	sources []string
	// noRates: the sources' throughputs are not per op (YCSB's run ops/s is
	// reads and updates together: the YCSB table compares it).
	noRates bool
}

// find returns the backend-wide figure of an op (phase "" for the op itself)
// and stat (p50, p99, mean, rate).
func (r refs) find(backend, op, phase, stat string) (baseline.Figure, bool) {
	if r.b == nil {
		return baseline.Figure{}, false
	}
	for _, f := range r.b.Figures {
		if f.Backend == backend && f.Phase == phase && f.Stat == stat && len(f.Targets) == 0 &&
			slices.Contains(f.Ops, op) && slices.Contains(r.sources, f.Source) {
			return f, true
		}
	}
	return baseline.Figure{}, false
}

// comparison is one measured figure beside its reference.
type comparison struct {
	value, ref float64
	has        bool
	higher     bool // a throughput: more is better
	figure     baseline.Figure
}

// latencyRef compares a latency in ms with the op's figure of that stat.
func (r refs) latencyRef(backend, op, phase, stat string, valueMS float64) comparison {
	f, ok := r.find(backend, op, phase, stat)
	if !ok || (f.Kind != baseline.KindLatency && f.Kind != baseline.KindPhase) {
		return comparison{value: valueMS}
	}
	return comparison{value: valueMS, ref: f.Seconds() * 1000, has: true, figure: f}
}

// rateRef compares a throughput with the op's rate figure, when it is in unit.
func (r refs) rateRef(backend, op, unit string, value float64) comparison {
	f, ok := r.find(backend, op, "", "rate")
	if !ok || f.Unit != unit || r.noRates {
		return comparison{value: value, higher: true}
	}
	return comparison{value: value, ref: f.Value, has: true, higher: true, figure: f}
}

func (c comparison) ratio() float64 { return c.value / c.ref }

func (c comparison) verdict() string {
	switch {
	case !c.has:
		return ""
	case c.higher && c.value >= c.ref, !c.higher && c.value <= c.ref:
		return VerdictWithin
	case c.higher:
		return VerdictBelow
	}
	return VerdictBeyond
}

// cells are the Reference, Ratio and Verdict columns.
func (c comparison) cells() []string {
	if !c.has {
		return []string{"-", "-", "-"}
	}
	return []string{num(c.ref), ratio(c.ratio()), c.verdict()}
}
