package probes

import (
	"fmt"
	"regexp"
	"slices"
)

// Facts is what the generated alert rules, promtool tests and Grafana boards
// (internal/generate) know about a backend, declared as plain data by the
// probe itself (Backend.Facts, in probes/<backend>/register.go). The
// generator reads nothing else about a backend, so adding one never touches
// it; a probe still never imports the generator, Prometheus or Grafana.
type Facts struct {
	// NoBoard marks a backend without rules or a board of its own (noop,
	// which only measures the engine's overhead). Everything else is empty then.
	NoBoard bool
	// Title names the backend on the boards ("RabbitMQ").
	Title string
	// Ops are every op any configuration of the probe can run (each profile,
	// each reference object size), in the order of the board's latency
	// panels. Baseline figures may name only these ops and phases: a figure
	// for any other op is a reference, never an alert.
	Ops []OpFacts
	// Panels are the backend's own panels, drawn first in the board's
	// latency row (before one panel per op).
	Panels []Panel
	// Nodes marks a probe that knows its store's nodes (engine.NodeStater:
	// dbcanary_store_node_up): its board gets a row of the nodes side by side.
	Nodes bool
}

// OpFacts is one op as the rules and boards see it.
type OpFacts struct {
	Name string
	// Title is the op's panel title; the op's name when empty (or, for an
	// op with phases, "<name>: <phase> vs <phase>").
	Title string
	// Phases are the op's phase histograms (dbcanary_op_phase_seconds) that
	// baseline figures may alert on, in the order they end: the last one ends
	// with the op. An op with phases gets one panel of its phases' p50 and
	// p99, with lines at the last phase's thresholds, instead of a latency
	// panel. A phase the probe records (OpSpec.Phases) but leaves out here is
	// exported on /metrics only: its figures are references.
	Phases []string
}

// Panel is one of a backend's own board panels, as data: a time series of
// one quantity the generator records for every backend, selected by op (and
// quantile or direction). The generator adds the backend and target
// selectors to every query and sets the unit from the series.
type Panel struct {
	Title       string
	Description string
	// Queries are the panel's lines; all of one Series.
	Queries []Query
	// ThresholdsOf names an op (of Facts.Ops) whose latency alert thresholds
	// the panel draws as lines and whose documented figures end its
	// description. Empty: a SeriesLatencyVsBaseline panel draws lines at the
	// baseline file's warning and critical factors, any other none.
	ThresholdsOf string
}

// Series is a quantity the generator records for every backend from the
// engine's metrics.
type Series string

// The series a Panel can draw.
const (
	// SeriesLatency is an op's latency quantile over 5m, in seconds (every
	// attempt, from its intended start).
	SeriesLatency Series = "latency"
	// SeriesLatencyVsBaseline is an op's latency quantile over 5m divided by
	// the op's documented alert figure of the same quantile (a factor).
	SeriesLatencyVsBaseline Series = "latency_vs_baseline"
	// SeriesBytes is payload bytes per second over 5m.
	SeriesBytes Series = "bytes"
)

// Query is one line of a Panel.
type Query struct {
	Series Series
	// Ops is a regular expression over the backend's op names
	// ("publish|consume", "search_.*"); empty for every op.
	Ops string
	// Quantile selects one recorded quantile of a latency series (0.99);
	// 0 for every recorded quantile.
	Quantile float64
	// Direction selects "sent" or "received" bytes of a SeriesBytes query;
	// empty for both.
	Direction string
	// Legend names each line; {{label}} is replaced by the series' label
	// (target, op, quantile, direction).
	Legend string
}

// Declared reports whether the facts say anything: a backend declares
// NoBoard or a title and its ops.
func (f Facts) Declared() bool {
	return f.NoBoard || f.Title != "" || len(f.Ops) > 0 || len(f.Panels) > 0
}

// Op returns the facts of one op.
func (f Facts) Op(name string) (OpFacts, bool) {
	for _, o := range f.Ops {
		if o.Name == name {
			return o, true
		}
	}
	return OpFacts{}, false
}

func (f Facts) check() error {
	if f.NoBoard {
		if f.Title != "" || len(f.Ops) > 0 || len(f.Panels) > 0 {
			return fmt.Errorf("NoBoard with a title, ops or panels")
		}
		return nil
	}
	if f.Title == "" || len(f.Ops) == 0 {
		return fmt.Errorf("a title and at least one op are required (or NoBoard)")
	}
	seen := map[string]bool{}
	for _, o := range f.Ops {
		if o.Name == "" || seen[o.Name] {
			return fmt.Errorf("op %q: empty or listed twice", o.Name)
		}
		seen[o.Name] = true
		phases := map[string]bool{}
		for _, p := range o.Phases {
			if p == "" || phases[p] {
				return fmt.Errorf("op %s: phase %q empty or listed twice", o.Name, p)
			}
			phases[p] = true
		}
	}
	for _, p := range f.Panels {
		if p.Title == "" || len(p.Queries) == 0 {
			return fmt.Errorf("panel %q: a title and at least one query are required", p.Title)
		}
		if p.ThresholdsOf != "" {
			if o, ok := f.Op(p.ThresholdsOf); !ok || len(o.Phases) > 0 {
				return fmt.Errorf("panel %q: ThresholdsOf %q is not an op without phases", p.Title, p.ThresholdsOf)
			}
		}
		for _, q := range p.Queries {
			switch {
			case q.Series != SeriesLatency && q.Series != SeriesLatencyVsBaseline && q.Series != SeriesBytes:
				return fmt.Errorf("panel %q: unknown series %q", p.Title, q.Series)
			case q.Series != p.Queries[0].Series:
				return fmt.Errorf("panel %q: queries of series %s and %s", p.Title, p.Queries[0].Series, q.Series)
			case q.Series == SeriesBytes && q.Quantile != 0:
				return fmt.Errorf("panel %q: a quantile of bytes", p.Title)
			case q.Series != SeriesBytes && q.Direction != "":
				return fmt.Errorf("panel %q: a direction of latency", p.Title)
			case q.Direction != "" && q.Direction != "sent" && q.Direction != "received":
				return fmt.Errorf("panel %q: direction %q (sent or received)", p.Title, q.Direction)
			case q.Quantile < 0 || q.Quantile >= 1:
				return fmt.Errorf("panel %q: quantile %g", p.Title, q.Quantile)
			case q.Legend == "":
				return fmt.Errorf("panel %q: a query without a legend", p.Title)
			}
			re, err := regexp.Compile("^(?:" + q.Ops + ")$")
			if err != nil {
				return fmt.Errorf("panel %q: ops %q: %v", p.Title, q.Ops, err)
			}
			if q.Ops != "" && !slices.ContainsFunc(f.Ops, func(o OpFacts) bool { return re.MatchString(o.Name) }) {
				return fmt.Errorf("panel %q: ops %q match no op", p.Title, q.Ops)
			}
		}
	}
	return nil
}
