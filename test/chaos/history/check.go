package history

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// ReceiverPager is the receiver of alerts/alertmanager.yml that pages.
const ReceiverPager = "pager"

// AlertDurabilityLoss is the alert a store losing acknowledged writes raises.
const AlertDurabilityLoss = "DbcanaryDurabilityLoss"

// Options are the checker's stated tolerances.
type Options struct {
	// PageGrace: a page up to PageGrace after a fault's revert is still the
	// fault's (the store's recovery, Alertmanager's group_wait).
	PageGrace time.Duration
	// NotifyGrace: any notification (resolved ones, tickets) up to
	// NotifyGrace after a fault's revert belongs to it (group_interval
	// sends the resolved notification).
	NotifyGrace time.Duration
	// TicketGrace: a notification of any receiver but the pager (a
	// warning's ticket) up to TicketGrace after a fault's revert belongs to
	// it: a symptom that outlasts the revert (a restarted JVM warming up)
	// tickets only after the warning's for: (up to 10m), so a ticket about
	// the fault can come that long after it. 0: NotifyGrace.
	TicketGrace time.Duration
	// Growth bounds, one per metric of Sample.
	Growth []GrowthBound
	// Lossy are the targets whose store is configured to lose acknowledged
	// writes (a transient ledger): their losses are a fault's expected
	// page, not a failure of the run.
	Lossy []string
}

// Fault is one injected fault rebuilt from the nemesis log, with its
// verdict.
type Fault struct {
	Seq            int
	Kind, Target   string
	Start, End     time.Time
	Pages          []string
	Budget         time.Duration
	Got            []Note // the pages it owns
	Verdict        string // VerdictOK, VerdictLate, VerdictMissed
	Extra          int    // pages beyond the one expected (all, when none was)
	Errors         []string
	PageAfter      time.Duration // injection to its expected page
	reverted, seen bool
}

// Verdicts of a fault.
const (
	VerdictOK     = "ok"
	VerdictLate   = "late"
	VerdictMissed = "missed"
	VerdictError  = "error" // the nemesis could not inject or revert it
)

// Report is the checker's result.
type Report struct {
	Faults  []*Fault
	Unowned []Note // pages no fault owns
	Outside []Note // notifications outside every fault window and its grace
	// Settling are the notifications before the run's start, while the
	// stack settled: listed, owned by no fault, judged only for losses.
	Settling   []Note
	Losses     []string
	Lossy      []string // targets configured to lose (Options.Lossy)
	Growth     []GrowthResult
	FirstUse   FirstUseResult
	Leftovers  []Leftover
	LeftoverOK []bool
	// The machine's load average over the samples (for the reader).
	LoadSum, LoadMax float64
	LoadN            int
}

// Check judges a recorded run.
func Check(h History, o Options) *Report {
	r := &Report{Faults: faults(h), Lossy: o.Lossy}
	var run []Note
	for _, n := range h.Notes {
		if !h.Start.IsZero() && n.At.Before(h.Start) {
			r.Settling = append(r.Settling, n)
		} else {
			run = append(run, n)
		}
	}
	pages := incidentPages(run)
	for _, p := range pages {
		if f := owner(r.Faults, p, o.PageGrace); f != nil {
			f.Got = append(f.Got, p)
		} else {
			r.Unowned = append(r.Unowned, p)
		}
	}
	for _, f := range r.Faults {
		judge(f)
	}
	for _, n := range run {
		grace := o.NotifyGrace
		if n.Receiver != ReceiverPager && o.TicketGrace > grace {
			grace = o.TicketGrace
		}
		if !inWindow(r.Faults, n, grace) {
			r.Outside = append(r.Outside, n)
		}
	}
	r.Losses = losses(h, o.Lossy)
	r.Growth = growth(h.Samples, o.Growth)
	r.FirstUse = firstUse(h.Samples)
	for _, s := range h.Samples {
		if s.Load > 0 {
			r.LoadSum, r.LoadMax, r.LoadN = r.LoadSum+s.Load, max(r.LoadMax, s.Load), r.LoadN+1
		}
	}
	for _, l := range h.Leftovers {
		r.Leftovers = append(r.Leftovers, l)
		r.LeftoverOK = append(r.LeftoverOK, l.OK())
	}
	return r
}

// OK reports whether the store holds no more canary data than it may: it
// was listed, nothing is older than allowed, and no more items than
// MaxItems (when set).
func (l Leftover) OK() bool {
	return l.Problem == "" && (l.Items == 0 || l.Oldest <= l.Allow) && (l.MaxItems == 0 || l.Items <= l.MaxItems)
}

// faults pairs the nemesis log's injections and reverts.
func faults(h History) []*Fault {
	bySeq := map[int]*Fault{}
	var out []*Fault
	for _, e := range h.Events {
		f := bySeq[e.Seq]
		if f == nil {
			f = &Fault{Seq: e.Seq, Kind: e.Kind, Target: e.Target}
			bySeq[e.Seq] = f
			out = append(out, f)
		}
		switch e.Phase {
		case PhaseInject:
			f.Start, f.Pages, f.Budget, f.seen = e.At, e.Pages, time.Duration(e.Budget), true
		case PhaseRevert:
			f.End, f.reverted = e.At, true
		}
		if e.Error != "" {
			f.Errors = append(f.Errors, e.Phase+": "+e.Error)
		}
	}
	for _, f := range out {
		if !f.seen {
			f.Errors = append(f.Errors, "reverted but never injected")
		}
		if !f.reverted {
			f.Errors = append(f.Errors, "never reverted")
			f.End = h.End
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// StatusDue marks a pager group Alertmanager held at the run's end with
// active alerts it had not sent yet: it pages at the group's next flush, so
// it counts as a page at the end.
const StatusDue = "due"

// incidentPages are the pager notifications that open an incident: a
// group's first firing notification, or its first after it resolved (or a
// group due at the end that is not open).
func incidentPages(notes []Note) []Note {
	open := map[string]bool{}
	var out []Note
	for _, n := range notes {
		if n.Receiver != ReceiverPager {
			continue
		}
		switch n.Status {
		case "firing", StatusDue:
			if !open[n.GroupKey] {
				out = append(out, n)
			}
			open[n.GroupKey] = true
		case "resolved":
			open[n.GroupKey] = false
		}
	}
	return out
}

// covers reports whether the fault's window plus grace holds the note, its
// alert did not fire before the fault (Note.Since), and the note is about
// the fault's target (a fault without one owns all).
func covers(f *Fault, n Note, grace time.Duration) bool {
	if f.Start.IsZero() || n.At.Before(f.Start) || n.At.After(f.End.Add(grace)) {
		return false
	}
	if !n.Since.IsZero() && n.Since.Before(f.Start) {
		return false // its alert fired before the fault: another cause
	}
	return f.Target == "" || n.GroupLabels["target"] == f.Target
}

// owner is the fault a page belongs to: the latest one started that covers it.
func owner(fs []*Fault, n Note, grace time.Duration) *Fault {
	var best *Fault
	for _, f := range fs {
		if covers(f, n, grace) && (best == nil || f.Start.After(best.Start)) {
			best = f
		}
	}
	return best
}

func inWindow(fs []*Fault, n Note, grace time.Duration) bool {
	return slices.ContainsFunc(fs, func(f *Fault) bool { return covers(f, n, grace) })
}

// judge sets a fault's verdict from the pages it owns.
func judge(f *Fault) {
	if len(f.Errors) > 0 {
		f.Verdict = VerdictError
	}
	if len(f.Pages) == 0 {
		f.Extra = len(f.Got)
		if f.Verdict == "" {
			f.Verdict = VerdictOK
		}
		return
	}
	first := slices.IndexFunc(f.Got, func(n Note) bool { return slices.Contains(f.Pages, n.GroupLabels["alertname"]) })
	f.Extra = len(f.Got)
	if first < 0 {
		if f.Verdict == "" {
			f.Verdict = VerdictMissed
		}
		return
	}
	f.Extra--
	f.PageAfter = f.Got[first].At.Sub(f.Start)
	if f.Verdict != "" {
		return
	}
	f.Verdict = VerdictOK
	if f.PageAfter > f.Budget {
		f.Verdict = VerdictLate
	}
}

// losses names every sign of a lost acknowledged write on a target whose
// store is configured not to lose one: a DurabilityLoss notification, or a
// ledger check counting one in dbcanary's metrics.
func losses(h History, lossy []string) []string {
	var out []string
	for _, n := range h.Notes {
		if n.GroupLabels["alertname"] == AlertDurabilityLoss && n.Status == "firing" && !slices.Contains(lossy, n.GroupLabels["target"]) {
			out = append(out, fmt.Sprintf("%s notified %s for %s", n.At.UTC().Format(time.TimeOnly), AlertDurabilityLoss, n.GroupLabels["target"]))
		}
	}
	seen := map[string]float64{}
	for _, s := range h.Samples {
		for tg, v := range s.LedgerLost {
			if v > seen[tg] && !slices.Contains(lossy, tg) {
				seen[tg] = v
			}
		}
	}
	for _, tg := range sortedKeys(seen) {
		if seen[tg] > 0 {
			out = append(out, fmt.Sprintf("dbcanary_ledger_checks_total{target=%q,result=~\"missing|corrupted\"} reached %g", tg, seen[tg]))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Failed reports whether the run fails: any fault not ok, an extra or
// unowned page, a notification outside the windows, a loss, growth or a
// leftover too old.
func (r *Report) Failed() bool {
	for _, f := range r.Faults {
		if f.Verdict != VerdictOK || f.Extra > 0 {
			return true
		}
	}
	if len(r.Unowned) > 0 || len(r.Outside) > 0 || len(r.Losses) > 0 || slices.Contains(r.LeftoverOK, false) {
		return true
	}
	return !r.FirstUse.OK() || slices.ContainsFunc(r.Growth, func(g GrowthResult) bool { return !g.OK })
}

// FirstUseResult judges the series failures create on first use: at every
// sample at most what the documented layout allows for the ops scraped.
type FirstUseResult struct {
	Judged      int     // samples that counted them (recorded since 6 Dec 2026)
	Most        float64 // the most seen
	Allowed     float64 // the allowance at that sample
	Over        int     // samples above their allowance
	WorstOver   float64 // the most above it
	WorstSample time.Time
}

// OK: no sample above its allowance.
func (r FirstUseResult) OK() bool { return r.Over == 0 }

func firstUse(samples []Sample) FirstUseResult {
	var r FirstUseResult
	for _, s := range samples {
		if s.FirstUseMax == 0 {
			continue
		}
		r.Judged++
		if s.FirstUse >= r.Most {
			r.Most, r.Allowed = s.FirstUse, s.FirstUseMax
		}
		if d := s.FirstUse - s.FirstUseMax; d > 0 {
			r.Over++
			if d > r.WorstOver {
				r.WorstOver, r.WorstSample = d, s.At
			}
		}
	}
	return r
}

// noteString names a notification for the table.
func noteString(n Note, t0 time.Time) string {
	sign := "+"
	if n.At.Before(t0) {
		sign = ""
	}
	return fmt.Sprintf("%s%s %s %s %s{target=%s}", sign, n.At.Sub(t0).Round(time.Second), n.Receiver, n.Status, strings.TrimPrefix(n.GroupLabels["alertname"], "Dbcanary"), n.GroupLabels["target"])
}
