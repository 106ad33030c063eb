package generate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/metrics"
)

// Threshold is one latency alert threshold: a figure × factor, snapped onto a
// classic bucket bound where histogram_quantile is exact.
type Threshold struct {
	Figure  baseline.Figure
	Source  baseline.Source
	Backend string
	Op      string
	Phase   string
	// Target is set when the figure names its targets (one threshold each);
	// ExcludeTargets, on a backend-wide threshold, lists the targets that
	// have a figure of their own for the same op, phase and stat.
	Target         string
	ExcludeTargets []string
	Quantile       float64
	Severity       string
	Factor         float64
	// Raw is figure × factor in seconds; Bound is the bucket bound used.
	Raw, Bound float64
	// Timeout is the op's timeout the rules are generated for (OpTimeout).
	Timeout time.Duration
	// NeedsFull: Bound is not a classic bound of the op's histogram in the
	// default, compact layout (metrics.Options.Bounds), so the rule reads
	// buckets only a daemon run with --metrics.histograms=full exports.
	NeedsFull bool
}

// Unreachable reports whether the op times out before its latency can cross
// the bound: a timed-out op fails (cause timeout) with a latency just above
// its timeout, so a p99 at or above the timeout is never measured.
func (t Threshold) Unreachable() bool { return t.Bound >= t.Timeout.Seconds() }

// OpTimeout is the timeout the rules assume for a backend's op:
// policy.op_timeouts by "backend/op", then by "backend", else the config's
// default timeout (global.timeout), which every op has unless configured.
func OpTimeout(p baseline.Policy, backend, op string) time.Duration {
	if d, ok := p.OpTimeouts[backend+"/"+op]; ok {
		return time.Duration(d)
	}
	if d, ok := p.OpTimeouts[backend]; ok {
		return time.Duration(d)
	}
	return config.DefaultGlobal.Timeout
}

// targetMatcher selects the threshold's targets in PromQL ("" for all).
func (t Threshold) targetMatcher() string {
	if t.Target != "" {
		return fmt.Sprintf(`,target="%s"`, t.Target)
	}
	if len(t.ExcludeTargets) == 0 {
		return ""
	}
	alt := make([]string, len(t.ExcludeTargets))
	for i, x := range t.ExcludeTargets {
		alt[i] = strings.ReplaceAll(regexp.QuoteMeta(x), `\`, `\\`)
	}
	return fmt.Sprintf(`,target!~"%s"`, strings.Join(alt, "|"))
}

// Shift is how far the bound moved from the raw value, relative (+0.14 = 14 % looser).
func (t Threshold) Shift() float64 { return t.Bound/t.Raw - 1 }

// nextBound is the smallest classic bound above v (+Inf past the last).
func nextBound(v float64) float64 {
	for _, x := range metrics.LatencyBuckets {
		if x > v {
			return x
		}
	}
	return math.Inf(1)
}

// Thresholds derives the latency thresholds the rules alert on from the
// baseline's alert figures, in file order, warning before critical. A
// threshold at or above its op's timeout is left out (Unreachable, listed by
// SkippedThresholds): no rule that can never fire is generated.
func Thresholds(b *baseline.File) ([]Threshold, error) {
	all, err := allThresholds(b)
	var out []Threshold
	for _, t := range all {
		if !t.Unreachable() {
			out = append(out, t)
		}
	}
	return out, err
}

// SkippedThresholds are the thresholds Thresholds leaves out: at or above
// their op's timeout (raise policy.op_timeouts with the ops' timeouts in the
// config to alert on them).
func SkippedThresholds(b *baseline.File) ([]Threshold, error) {
	all, err := allThresholds(b)
	var out []Threshold
	for _, t := range all {
		if t.Unreachable() {
			out = append(out, t)
		}
	}
	return out, err
}

// SkippedNote is one line saying why a threshold has no rule.
func (t Threshold) SkippedNote() string {
	what := t.Backend + " " + t.Op
	if t.Phase != "" {
		what += " " + t.Phase
	}
	return fmt.Sprintf("no %s rule for %s p%s %s (figure %s): its threshold %gs is at or above the op's %s timeout, so it could never fire (the op fails as a timeout first); set policy.op_timeouts[%s/%s] to the timeout the config gives the op and regenerate",
		AlertLatencyAboveBaseline, what, strings.TrimPrefix(qs(t.Quantile*100), "0"), t.Severity, t.Figure.ID, t.Bound, t.Timeout, t.Backend, t.Op)
}

func allThresholds(b *baseline.File) ([]Threshold, error) {
	var out []Threshold
	var errs []error
	own := map[string][]string{} // backend/op/phase/stat → targets with a figure of their own
	for _, f := range b.Figures {
		if f.Use == baseline.UseAlert {
			for _, op := range f.Ops {
				k := strings.Join([]string{f.Backend, op, f.Phase, f.Stat}, "/")
				own[k] = append(own[k], f.Targets...)
			}
		}
	}
	for i, x := range b.Buckets {
		if !slices.Contains(metrics.LatencyBuckets, x) {
			errs = append(errs, fmt.Errorf("buckets[%d]: %gs is not a classic bound of this build's histograms, which take the buckets of baselines/james-reference.yaml (compiled in): add it there and rebuild", i, x))
		}
	}
	for _, f := range b.Figures {
		if f.Use != baseline.UseAlert {
			continue
		}
		targets := f.Targets
		if len(targets) == 0 {
			targets = []string{""}
		}
		q, _ := f.Quantile()
		be, ok := backendByName(f.Backend)
		if !ok {
			errs = append(errs, fmt.Errorf("figure %s: backend %q is not a registered probe with a board (probes.Register)", f.ID, f.Backend))
			continue
		}
		fac := b.EffectiveFactors(f)
		for _, op := range f.Ops {
			if !be.hasOp(op, f.Phase) {
				errs = append(errs, fmt.Errorf("figure %s: %s has no op %q (phase %q) in its probe's facts (probes/%s/register.go)", f.ID, f.Backend, op, f.Phase, f.Backend))
				continue
			}
			for _, target := range targets {
				var exclude []string
				if target == "" {
					exclude = own[strings.Join([]string{f.Backend, op, f.Phase, f.Stat}, "/")]
				}
				for _, sev := range []struct {
					name   string
					factor float64
				}{{"warning", fac.Warning}, {"critical", fac.Critical}} {
					raw := f.Seconds() * sev.factor
					// A bound the op's histogram exports in the default, compact
					// layout when it is the one the whole ladder gives; else the
					// ladder's, and the rule needs --metrics.histograms=full.
					bound, ok := metrics.Snap(raw, b.SnapTolerance, metrics.LatencyBuckets)
					compact, cok := metrics.Snap(raw, b.SnapTolerance, metrics.Options{}.Bounds(f.Backend, op, f.Phase))
					needsFull := !cok || compact != bound
					if !ok {
						errs = append(errs, fmt.Errorf("figure %s: %s threshold %gs (%g × %g) has no classic bucket bound below the top one: lower the factor or add a bound to the baseline's buckets",
							f.ID, sev.name, raw, f.Seconds(), sev.factor))
						continue
					}
					if sev.name == "critical" && len(out) > 0 && out[len(out)-1].Bound >= bound {
						errs = append(errs, fmt.Errorf("figure %s op %s: critical threshold snaps to %gs, not above the warning's %gs: raise factors.critical", f.ID, op, bound, out[len(out)-1].Bound))
						continue
					}
					out = append(out, Threshold{Figure: f, Source: b.Source(f.Source), Backend: f.Backend, Op: op, Phase: f.Phase,
						Target: target, ExcludeTargets: exclude, Quantile: q, Severity: sev.name, Factor: sev.factor, Raw: raw, Bound: bound,
						Timeout: OpTimeout(b.Policy, f.Backend, op), NeedsFull: needsFull})
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ThresholdTable documents every latency threshold next to its figure, factor
// and the bucket bound it was snapped to (alerts/thresholds.md), and the
// thresholds left out because their op times out first.
func ThresholdTable(b *baseline.File) []byte {
	all, err := allThresholds(b)
	var buf bytes.Buffer
	buf.WriteString("<!-- Generated by `dbcanary generate rules`. DO NOT EDIT. -->\n# Latency thresholds\n\n")
	buf.WriteString("Each threshold is figure × factor, snapped onto a classic bucket bound the op's histogram exports\n" +
		"(`metrics.BoardBuckets` and the op's `metrics.ThresholdBounds`; docs/sizing.md)\n" +
		"(down if a bound is within the snap tolerance, else up). `shift` is how much looser (+) or tighter (−)\n" +
		"the bound is than figure × factor; a large positive shift means a bucket bound is missing there.\n" +
		"`timeout` is the op's timeout the rules are generated for (`policy.op_timeouts`, else the config's\n" +
		"default `global.timeout`): a threshold at or above it has no rule (see the end of this file).\n\n")
	if err != nil {
		fmt.Fprintf(&buf, "ERROR: %v\n", err)
		return buf.Bytes()
	}
	buf.WriteString("| backend | op | phase | stat | figure | severity | factor | figure × factor | bound | shift | timeout | source | conditions |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var skipped []Threshold
	for _, t := range all {
		if t.Unreachable() {
			skipped = append(skipped, t)
			continue
		}
		op := t.Op
		if t.Target != "" {
			op += " (target " + t.Target + ")"
		}
		fmt.Fprintf(&buf, "| %s | %s | %s | %s | %s (`%s`) | %s | %g | %gs | %gs | %+.1f %% | %s | %s | %s |\n",
			t.Backend, op, t.Phase, t.Figure.Stat, fmtFigure(t.Figure), t.Figure.ID, t.Severity, t.Factor, round(t.Raw), t.Bound, t.Shift()*100,
			t.Timeout, t.Source.Document, t.Figure.Conditions)
	}
	var full []Threshold
	for _, t := range all {
		if t.NeedsFull && !t.Unreachable() {
			full = append(full, t)
		}
	}
	if len(full) > 0 {
		buf.WriteString("\n## Needs `--metrics.histograms=full`\n\n" +
			"These bounds are not classic buckets of the op's histogram in the default, compact layout\n" +
			"(`metrics.BoardBuckets` and `metrics.ThresholdBounds`): run the daemon with `--metrics.histograms=full`\n" +
			"(or add the bounds to `metrics.ThresholdBounds`), else these rules never fire.\n\n" +
			"| backend | op | phase | severity | bound |\n|---|---|---|---|---|\n")
		for _, t := range full {
			fmt.Fprintf(&buf, "| %s | %s | %s | %s | %gs |\n", t.Backend, t.Op, t.Phase, t.Severity, t.Bound)
		}
	}
	if len(skipped) > 0 {
		buf.WriteString("\n## Left out: at or above the op's timeout\n\n" +
			"These thresholds could never be crossed: the op fails as a timeout (cause `timeout`, counted by the error-ratio\n" +
			"and error-budget alerts) before its latency reaches them. To alert on them, give the op a longer timeout in the\n" +
			"config and the same value in the baseline's `policy.op_timeouts`, then regenerate.\n\n" +
			"| backend | op | phase | stat | figure | severity | bound | timeout |\n|---|---|---|---|---|---|---|---|\n")
		for _, t := range skipped {
			fmt.Fprintf(&buf, "| %s | %s | %s | %s | %s (`%s`) | %s | %gs | %s |\n",
				t.Backend, t.Op, t.Phase, t.Figure.Stat, fmtFigure(t.Figure), t.Figure.ID, t.Severity, t.Bound, t.Timeout)
		}
	}
	return buf.Bytes()
}
