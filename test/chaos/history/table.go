package history

import (
	"fmt"
	"strings"
	"time"
)

// kindRow is one fault kind's line of the table.
type kindRow struct {
	kind, expect                            string
	injected, ok, late, missed, extra, errs int
	after                                   []string
}

// Table prints the report in Markdown: the verdict per fault kind, then
// every fault, then the run-wide checks; t0 is the run's start.
func (r *Report) Table(t0 time.Time) string {
	var b strings.Builder
	b.WriteString("| fault kind | expected | injected | paged as expected | late | missed | extra pages | errors | page after |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range r.kindRows() {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %s |\n", k.kind, k.expect, k.injected, k.ok, k.late, k.missed, k.extra, k.errs, orDash(strings.Join(k.after, ", ")))
	}
	b.WriteString("\n| # | fault | target | injected | held | verdict | pages |\n|---|---|---|---|---|---|---|\n")
	for _, f := range r.Faults {
		var got []string
		for _, n := range f.Got {
			got = append(got, noteString(n, t0))
		}
		v := f.Verdict
		if f.Extra > 0 {
			v += fmt.Sprintf(" +%d extra", f.Extra)
		}
		if len(f.Errors) > 0 {
			v += " (" + strings.Join(f.Errors, "; ") + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | +%s | %s | %s | %s |\n", f.Seq, f.Kind, orDash(f.Target), f.Start.Sub(t0).Round(time.Second), f.End.Sub(f.Start).Round(time.Second), v, orDash(strings.Join(got, "; ")))
	}
	r.runWide(&b, t0)
	return b.String()
}

func (r *Report) kindRows() []kindRow {
	idx := map[string]*kindRow{}
	var order []string
	for _, f := range r.Faults {
		k := idx[f.Kind]
		if k == nil {
			k = &kindRow{kind: f.Kind, expect: "no page"}
			if len(f.Pages) > 0 {
				k.expect = strings.TrimPrefix(strings.Join(f.Pages, "\\|"), "Dbcanary") + " ≤ " + f.Budget.String()
			}
			idx[f.Kind] = k
			order = append(order, f.Kind)
		}
		k.injected++
		k.extra += f.Extra
		switch f.Verdict {
		case VerdictOK:
			k.ok++
		case VerdictLate:
			k.late++
		case VerdictMissed:
			k.missed++
		default:
			k.errs++
		}
		if f.PageAfter > 0 {
			k.after = append(k.after, f.PageAfter.Round(time.Second).String())
		}
	}
	out := make([]kindRow, 0, len(order))
	for _, o := range order {
		out = append(out, *idx[o])
	}
	return out
}

// runWide prints the checks over the whole run.
func (r *Report) runWide(b *strings.Builder, t0 time.Time) {
	b.WriteString("\n| check | result |\n|---|---|\n")
	fmt.Fprintf(b, "| pages no fault owns | %s |\n", notesCell(r.Unowned, t0))
	fmt.Fprintf(b, "| notifications outside every fault window and its grace | %s |\n", notesCell(r.Outside, t0))
	if len(r.Settling) > 0 {
		// listed, not failed: no bold
		fmt.Fprintf(b, "| notifications before the run (while the stack settled) | %s |\n", strings.Replace(notesCell(r.Settling, t0), "**", "", 2))
	}
	which := "every target: none is configured to lose one"
	if len(r.Lossy) > 0 {
		which = "every target but " + strings.Join(r.Lossy, ", ") + ", configured to lose"
	}
	fmt.Fprintf(b, "| acknowledged writes lost (%s) | %s |\n", which, orZero(strings.Join(r.Losses, "; ")))
	for _, g := range r.Growth {
		verdict := "ok"
		if !g.OK {
			verdict = "**FAIL**"
		}
		what := g.Metric
		if what == MetricSeries {
			what = "series (those failures create on first use apart)"
		}
		if g.N == 0 {
			fmt.Fprintf(b, "| %s flat | %s: %s |\n", what, verdict, g.Note)
			continue
		}
		fmt.Fprintf(b, "| %s flat | %s: slope %.4g/h over %s (%d samples, mean %.4g): growth %.4g, bound %.4g |\n",
			what, verdict, g.PerHour, g.Span.Round(time.Second), g.N, g.Mean, g.Growth, g.Limit)
	}
	switch fu := r.FirstUse; {
	case fu.Judged == 0:
		b.WriteString("| series failures create on first use | not counted (a run recorded before 6 Dec 2026) |\n")
	case !fu.OK():
		fmt.Fprintf(b, "| series failures create on first use | **FAIL**: %d of %d samples above the documented bound, by up to %.0f (at %s) |\n",
			fu.Over, fu.Judged, fu.WorstOver, "+"+fu.WorstSample.Sub(t0).Round(time.Second).String())
	default:
		fmt.Fprintf(b, "| series failures create on first use | ok: at most %.0f, within the documented bound (%.0f for the ops then) in all %d samples |\n",
			fu.Most, fu.Allowed, fu.Judged)
	}
	for i, l := range r.Leftovers {
		verdict := "ok"
		if !r.LeftoverOK[i] {
			verdict = "**FAIL**"
		}
		limit := ""
		if l.MaxItems > 0 {
			limit = fmt.Sprintf(" (at most %d)", l.MaxItems)
		}
		fmt.Fprintf(b, "| canary data left in %s | %s: %d items%s, oldest %s, allowed %s %s%s |\n", l.Store, verdict, l.Items, limit,
			time.Duration(l.Oldest).Round(time.Second), time.Duration(l.Allow), l.Detail, l.Problem)
	}
	if r.LoadN > 0 {
		fmt.Fprintf(b, "| machine load average (1 min) while sampled | mean %.1f, highest %.1f (%d samples) |\n", r.LoadSum/float64(r.LoadN), r.LoadMax, r.LoadN)
	}
	verdict := "**PASS**"
	if r.Failed() {
		verdict = "**FAIL**"
	}
	fmt.Fprintf(b, "| verdict | %s |\n", verdict)
}

func notesCell(ns []Note, t0 time.Time) string {
	if len(ns) == 0 {
		return "0"
	}
	s := make([]string, 0, len(ns))
	for _, n := range ns {
		s = append(s, noteString(n, t0))
	}
	return fmt.Sprintf("**%d**: %s", len(ns), strings.Join(s, "; "))
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return "**" + s + "**"
}
