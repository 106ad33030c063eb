//go:build integration

package pages

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/pager"
)

// primary is the backend's primary alerted op: its first critical latency
// threshold in the baseline file (the figure the backend's alerts use).
func (s *suite) primary(backend string) (generate.Threshold, bool) {
	for _, th := range s.th {
		if th.Backend == backend && th.Severity == "critical" {
			return th, true
		}
	}
	return generate.Threshold{}, false
}

// latency adds 4 x the primary op's p99 figure to every reply of the target's proxy.
func (s *suite) latency(ctx context.Context, backend string, tg *target, added time.Time) {
	f := s.add(&fault{backend: backend, kind: "latency", key: tg.name, scope: []string{tg.name}, windowStart: added,
		expect: generate.AlertLatencyAboveBaseline, expectSev: "critical", budget: s.budget(generate.AlertLatencyAboveBaseline)})
	th, ok := s.primary(backend)
	if !ok {
		f.fail("no critical latency threshold for %s in the baseline", backend)
		return
	}
	lat := time.Duration(4 * th.Figure.Seconds() * float64(time.Second)).Round(time.Millisecond)
	op := th.Op
	if th.Phase != "" {
		op += " " + th.Phase
	}
	f.what = fmt.Sprintf("latency x4: +%s on every reply (toxiproxy latency, downstream) = 4 x the %s %s figure `%s` (critical bound %gs)",
		lat, op, th.Figure.Stat, th.Figure.ID, th.Bound)
	f.start = time.Now()
	s.logf("%s: %s", tg.name, f.what)
	if _, err := tg.proxy.AddToxic("pages-latency", "latency", "downstream", 1, toxiproxy.Attributes{"latency": lat.Milliseconds()}); err != nil {
		f.fail("toxiproxy: %v", err)
		return
	}
	if _, ok := s.waitAlert(f); ok {
		s.waitPage(f)
	}
	if err := tg.proxy.RemoveToxic("pages-latency"); err != nil {
		f.fail("toxiproxy: %v", err)
	}
	f.reverted = time.Now()
	s.diagnose(ctx, f)
}

// credentials reloads the target with a wrong password (secret key for S3).
func (s *suite) credentials(ctx context.Context, backend string, tg *target, added time.Time) {
	f := s.add(&fault{backend: backend, kind: "credentials", key: tg.name, scope: []string{tg.name}, windowStart: added,
		expect: generate.AlertTargetMisconfigured, expectSev: "critical", budget: s.budget(generate.AlertTargetMisconfigured)})
	f.what = "reload (POST /-/reload) with a wrong secret in the target's password file"
	switch backend {
	case "s3":
		f.what = "reload (POST /-/reload) with a wrong secret access key file"
	case "opensearch":
		f.what += " (a basic-auth gate in front of the node stands in for the security plugin the local server lacks)"
	}
	f.start = time.Now()
	s.logf("%s: %s", tg.name, f.what)
	if err := s.d.setMode(ctx, modeBadSecret, tg); err != nil {
		f.fail("%v", err)
		return
	}
	if _, ok := s.waitAlert(f); ok {
		s.waitPage(f)
	}
	if err := s.d.setMode(ctx, modeOK, tg); err != nil {
		f.fail("reload back: %v", err)
	}
	f.reverted = time.Now()
	s.diagnose(ctx, f)
}

// setupError makes the target's namespace unusable for setup reasons.
func (s *suite) setupError(ctx context.Context, backend string, tg *target, added time.Time) {
	f := s.add(&fault{backend: backend, kind: "setup", key: tg.name, scope: []string{tg.name}, windowStart: added,
		expect: generate.AlertTargetMisconfigured, expectSev: "critical", budget: s.budget(generate.AlertTargetMisconfigured)})
	f.start = time.Now()
	what, undo, err := prepareSetupError(ctx, s.t, s.d, tg)
	f.what = what
	if err != nil {
		f.fail("preparing the setup error: %v", err)
		_ = undo(ctx)
		return
	}
	s.logf("%s: setup error: %s", tg.name, what)
	if err := s.d.setMode(ctx, modeSetup, tg); err != nil {
		f.fail("%v", err)
	}
	if _, ok := s.waitAlert(f); ok {
		s.waitPage(f)
	}
	if err := undo(ctx); err != nil {
		f.fail("undo: %v", err)
	}
	if err := s.d.setMode(ctx, modeOK, tg); err != nil {
		f.fail("reload back: %v", err)
	}
	f.reverted = time.Now()
	s.diagnose(ctx, f)
}

// dataAltered changes the canary's data behind its back.
func (s *suite) dataAltered(ctx context.Context, backend string, tg *target, added time.Time) {
	f := s.add(&fault{backend: backend, kind: "data", key: tg.name, scope: []string{tg.name}, windowStart: added,
		expect: generate.AlertDataIntegrity, expectSev: "critical", budget: s.budget(generate.AlertDataIntegrity)})
	f.start = time.Now()
	what, err := alterData(ctx, s.t, s.d, tg)
	f.what = what
	if err != nil {
		f.fail("altering the data: %v", err)
		return
	}
	s.logf("%s: %s", tg.name, what)
	stop := func() {}
	if backend == "s3" {
		stop = s.keepAlteringS3(ctx, tg)
	}
	if _, ok := s.waitAlert(f); ok {
		s.waitPage(f)
	}
	stop()
	f.reverted = time.Now()
	s.diagnose(ctx, f)
}

// s3Realter is how often the S3 data fault overwrites the run's objects again.
const s3Realter = 10 * time.Second

// keepAlteringS3 overwrites the target's canary objects again every s3Realter
// until the returned stop is called: a store that corrupts what it holds for
// as long as the fault lasts. One pass is not enough on S3: the probe reads a
// random object of each size at the rate it overwrites and deletes them, so
// with one or two objects per size every altered object can be replaced or
// deleted before a get reads it (the fresh-clone CI of 6 Dec 19:19: 4 objects
// altered, none read, no page within 1m30s). Cassandra's rows and OpenSearch's
// documents are read again before the canary replaces them, and RabbitMQ's
// foreign messages wait in the queue, so they need one pass.
func (s *suite) keepAlteringS3(ctx context.Context, tg *target) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(s3Realter)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// All objects of the run may be gone between two passes (deleted
			// at the rate they are written): the next pass finds new ones.
			what, err := alterS3(ctx, s.t, s.d, tg)
			switch {
			case err == nil:
				s.logf("%s: again: %s", tg.name, what)
			case ctx.Err() == nil: // an error from the stop itself is not worth a line
				s.logf("%s: again: %v", tg.name, err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// owner is the fault an alert of these labels, starting at `at`, belongs
// to: the latest fault whose scope holds its target and whose window had
// started.
func (s *suite) owner(labels map[string]string, at time.Time) *fault {
	tgt := labels["target"]
	var best *fault
	for _, f := range s.faults {
		if !slices.Contains(f.scope, tgt) || f.windowStart.After(at) {
			continue
		}
		if best == nil || f.windowStart.After(best.windowStart) {
			best = f
		}
	}
	return best
}

func fmtRel(d time.Duration) string {
	if d < 0 {
		return "-" + (-d).Round(time.Second).String()
	}
	return "+" + d.Round(time.Second).String()
}

type rowStats struct {
	eps                    []episode
	pages, notifs, tickets int
	due                    int
	pageTimes              []time.Duration
	expected               *episode
	// corroboratedPages: pages of latency criticals the same rule also
	// raised on a target with no fault (not counted in pages).
	corroboratedPages int
}

// report evaluates every fault and renders the markdown table.
func (s *suite) report(end time.Time, groups []amGroup, healthy, global *fault) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	stats := map[*fault]*rowStats{}
	st := func(f *fault) *rowStats {
		if stats[f] == nil {
			stats[f] = &rowStats{}
		}
		return stats[f]
	}
	// excused: latency criticals the same rule also raised on a target with
	// no fault, the store slow for every client (see corroboration), by
	// episodeKey, with why.
	excused := map[string]string{}
	eps := s.m.rec.episodes()
	for _, e := range eps {
		f := s.owner(e.Labels, e.Fired)
		if f == nil {
			continue
		}
		st(f).eps = append(st(f).eps, e)
		if f.kind == "latency" || f.kind == "healthy" {
			continue
		}
		if why := s.corroboration(e, end); why != "" {
			excused[episodeKey(e)] = why
		} else if why := s.slowBefore(e, f); why != "" {
			excused[episodeKey(e)] = why
		}
	}
	// excusedAlert: a notified alert is one of those episodes.
	excusedAlert := func(labels map[string]string, startsAt time.Time) bool {
		k := labelKey(labels)
		for _, e := range eps {
			if excused[episodeKey(e)] == "" || labelKey(e.Labels) != k {
				continue
			}
			from, to := e.Fired, e.Ended
			if !e.Active.IsZero() {
				from = e.Active
			}
			if to.IsZero() {
				to = end
			}
			if !startsAt.Before(from.Add(-time.Minute)) && !startsAt.After(to) {
				return true
			}
		}
		return false
	}
	// Pages as a pager counts them: the first firing notification of a
	// group, or the first after that group's last one resolved everything.
	open := map[string]bool{}
	for _, n := range s.m.hook.All() {
		owners := map[*fault]bool{}
		excusedOwners := map[*fault]bool{}
		for _, a := range n.Alerts {
			if a.Status != "firing" {
				continue
			}
			if f := s.owner(a.Labels, a.StartsAt); f != nil {
				if excusedAlert(a.Labels, a.StartsAt) {
					excusedOwners[f] = true
					continue
				}
				owners[f] = true
			}
		}
		newIncident := false
		if n.Receiver == pager.ReceiverPager {
			k := incidentKey(n.Receiver, n.GroupLabels)
			if n.Status == "firing" && !open[k] {
				newIncident = true
			}
			open[k] = n.Status == "firing"
		}
		if newIncident {
			for f := range excusedOwners {
				if !owners[f] {
					st(f).corroboratedPages++
				}
			}
		}
		for f := range owners {
			r := st(f)
			switch {
			case n.Receiver == pager.ReceiverPager:
				r.notifs++
				if newIncident {
					r.pages++
					r.pageTimes = append(r.pageTimes, n.At.Sub(f.start))
				}
			default:
				r.tickets++
			}
		}
	}
	// Due: a pager group with active alerts and no open incident pages at
	// its next flush.
	for _, g := range groups {
		if g.Receiver != pager.ReceiverPager || open[incidentKey(g.Receiver, g.Labels)] {
			continue
		}
		first := g.Alerts[0]
		for _, a := range g.Alerts {
			if a.StartsAt.Before(first.StartsAt) {
				first = a
			}
		}
		if f := s.owner(first.Labels, first.StartsAt); f != nil && !excusedAlert(first.Labels, first.StartsAt) {
			st(f).due++
		}
	}

	var b strings.Builder
	mean, highest := s.m.rec.load()
	fmt.Fprintf(&b, "Page-quality run of %s (%s, %d cores, 1-minute load average mean %.1f, max %.1f); rules as generated from baselines/james-reference.yaml with `for:` overrides %s; Alertmanager: alerts/alertmanager.yml.\n\n",
		end.Sub(s.t0).Round(time.Second), s.t0.UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), mean, highest, fmtOverrides())
	b.WriteString("| backend | fault | expected (budget) | alerts fired (time from fault) | other criticals | pages (tickets) | result |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	order := map[string]int{"healthy": 0, "exporter": 1, "restart": 2, "stop": 3, "latency": 4, "credentials": 5, "setup": 6, "data": 7, "cert": 8}
	faults := append([]*fault(nil), s.faults...)
	sort.SliceStable(faults, func(i, j int) bool {
		if (faults[i].backend == "all") != (faults[j].backend == "all") {
			return faults[i].backend == "all"
		}
		if faults[i].backend != faults[j].backend {
			return faults[i].backend < faults[j].backend
		}
		return order[faults[i].kind] < order[faults[j].kind]
	})
	for _, f := range faults {
		r := st(f)
		sort.Slice(r.eps, func(i, j int) bool { return r.eps[i].Fired.Before(r.eps[j].Fired) })
		var others []string
		mayFired := false
		for i := range r.eps {
			e := r.eps[i]
			isExpected := f.expect != "" && e.name() == f.expect && e.severity() == f.expectSev
			if isExpected && e.Labels["target"] == f.key && !e.Fired.Before(f.start) && r.expected == nil {
				r.expected = &r.eps[i]
			}
			if e.severity() == "critical" && !isExpected && e.Labels["target"] == f.key && slices.Contains(f.mayPage, e.name()) {
				mayFired = true
				continue
			}
			if e.severity() == "critical" && !isExpected {
				o := pager.AlertString(e.Labels) + " " + fmtRel(e.Fired.Sub(f.start))
				if !e.Active.IsZero() && e.Active.Before(f.start) {
					o += " (condition true since " + fmtRel(e.Active.Sub(f.start)) + ")"
				}
				if why := excused[episodeKey(e)]; why != "" {
					o += corroboratedMark + why + ")"
				}
				if e.SeenAM && !e.Unsuppressed {
					o += inhibitedMark
				}
				others = append(others, o)
			}
		}
		goal := 0
		switch f.kind {
		case "healthy", "exporter":
			for _, e := range r.eps {
				if f.kind == "healthy" || e.severity() == "critical" {
					f.fail("%s fired %s", pager.AlertString(e.Labels), fmtRel(e.Fired.Sub(f.start)))
				}
			}
			if f.kind == "healthy" && r.notifs+r.tickets > 0 {
				f.fail("%d notifications while healthy", r.notifs+r.tickets)
			}
			others = nil
		default:
			// An alert that may fire may also resolve before Alertmanager's
			// group_wait and never page (a TargetDown of 12 s did): 0 or 1.
			if mayFired && f.expect == "" && r.pages+r.due == 1 {
				goal = 1
			}
			if f.expect != "" {
				goal = 1
				switch {
				case r.expected == nil:
					f.fail("%s (%s) did not fire within %s", strings.TrimPrefix(f.expect, "Dbcanary"), f.expectSev, f.budget)
				case r.expected.Fired.Sub(f.start) > f.budget:
					f.fail("%s fired after %s, budget %s", strings.TrimPrefix(f.expect, "Dbcanary"), r.expected.Fired.Sub(f.start).Round(time.Second), f.budget)
				}
			}
			// A critical Alertmanager inhibited for as long as it fired
			// never reached the operator: listed, not failed.
			for _, o := range others {
				if !strings.HasSuffix(o, inhibitedMark) && !strings.Contains(o, corroboratedMark) {
					f.fail("other critical: %s", o)
				}
			}
			if r.pages+r.due != goal {
				f.fail("%d page(s)%s, want %d", r.pages, dueText(r.due), goal)
			}
		}
		if f.kind == "exporter" && len(r.eps) == 0 && len(f.failures) == 0 {
			continue
		}
		expected := "none (any severity)"
		switch {
		case f.kind == "exporter":
			expected = "no critical"
		case f.kind == "restart" && f.expect == "":
			expected = "no critical, no page"
		case f.expect != "":
			expected = fmt.Sprintf("%s/%s (%s)", strings.TrimPrefix(f.expect, "Dbcanary"), f.expectSev, f.budget)
		}
		if len(f.mayPage) > 0 {
			var may []string
			for _, a := range f.mayPage {
				may = append(may, strings.TrimPrefix(a, "Dbcanary")+"/critical")
			}
			if f.expect == "" {
				expected = "no page, or one"
			}
			expected += " (on the threshold: " + strings.Join(may, ", ") + " may fire)"
		}
		what := f.what
		if f.key != "" {
			what = "`" + f.key + "`: " + what
		}
		if len(f.notes) > 0 {
			what += "; " + strings.Join(f.notes, "; ")
		}
		pages := fmt.Sprintf("%d", r.pages)
		if len(r.pageTimes) > 0 {
			var ts []string
			for _, d := range r.pageTimes {
				ts = append(ts, fmtRel(d))
			}
			pages += " (" + strings.Join(ts, ", ") + ")"
		}
		pages += dueText(r.due)
		if r.corroboratedPages > 0 {
			pages += fmt.Sprintf(" + %d corroborated", r.corroboratedPages)
		}
		pages += fmt.Sprintf(" (%d)", r.tickets)
		result := "ok"
		if len(f.failures) > 0 {
			result = "**FAIL**: " + strings.Join(f.failures, "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", f.backend, cell(what), expected,
			cell(firedSummary(r.eps, f.start)), cell(strings.Join(others, "; ")), pages, cell(result))
	}
	b.WriteString("\nA latency critical marked corroborated is one whose rule also held, between its condition turning true and its firing, for a target of the same backend with no fault of its own, or whose condition turned true before its fault began while the target's samples of that op were already above the critical bound: the store was slow for every client (the machine's load, a JVM restarted minutes before), a true page the fault did not cause; it is listed, and its page counted apart, not failed.\n")
	b.WriteString("\nTimes are from the fault's injection to the first evaluation that saw the alert firing in Prometheus (pages: to the webhook POST).\n" +
		"A page is a pager notification opening an incident (the first firing notification of an Alertmanager group); \"due\" counts alerts Alertmanager holds active and unsent at the end (they page at the group's next flush).\n" +
		"Alerts belong to the fault whose target they carry, from the fault's window (for added targets: from their addition) to the next fault on that target.\n")
	return b.String()
}

// inhibitedMark ends an other critical that Alertmanager inhibited all along.
const inhibitedMark = " (inhibited all along)"

// corroboratedMark starts the note of an other critical the store's
// slowness for every client explains (corroboration).
const corroboratedMark = " (corroborated: "

func episodeKey(e episode) string { return labelKey(e.Labels) + "@" + e.Fired.String() }

// corroboration says why a latency critical that its fault does not
// explain was the store's doing and not a false page: the same alerting
// rule (same alert, severity, op and figure) also held for another target
// of the same backend that has no fault of its own (not the latency
// target, not the alert's own), at some evaluation from a minute before
// the alert's condition turned true to its firing. Both targets then saw
// the store above the critical bound at the same time: on CI's 2 cores at
// a load of 10-17 a JVM store is slow for every client, and a page says so
// truly. "" when no such target had it (or Prometheus cannot tell): the
// row fails as before.
func (s *suite) corroboration(e episode, end time.Time) string {
	if e.name() != generate.AlertLatencyAboveBaseline || e.severity() != "critical" {
		return ""
	}
	tgt := e.Labels["target"]
	var backend string
	var controls []string
	s.d.mu.Lock()
	for _, tg := range s.d.targets {
		if tg.name == tgt {
			backend = tg.backend
		}
	}
	for _, tg := range s.d.targets {
		if backend != "" && tg.backend == backend && tg.name != tgt && tg.role != roleLat {
			controls = append(controls, tg.name)
		}
	}
	s.d.mu.Unlock()
	if len(controls) == 0 {
		return ""
	}
	from := e.Fired
	if !e.Active.IsZero() && e.Active.Before(from) {
		from = e.Active
	}
	from = from.Add(-time.Minute)
	to := e.Fired
	if to.After(end) {
		to = end
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range s.alertRules {
		if r.Alert != e.name() || r.Labels["severity"] != "critical" || r.Labels["op"] != e.Labels["op"] ||
			(e.Labels["figure"] != "" && r.Labels["figure"] != e.Labels["figure"]) {
			continue
		}
		held, err := queryMax(ctx, s.m.promURL, r.Expr, from, to, 15*time.Second)
		if err != nil {
			s.logf("corroboration of %s: %v", pager.AlertString(e.Labels), err)
			return ""
		}
		for k := range held {
			for _, c := range controls {
				if strings.Contains(k, "target="+c+",") {
					return fmt.Sprintf("the same rule held for %s, a target with no fault, at the same time", c)
				}
			}
		}
	}
	return ""
}

// latencyRuleWindow is the window LatencyAboveBaseline's condition reads
// (generate.RecLatencyQuantile, quantile_rate5m, and its [5m] sample counts).
const latencyRuleWindow = 5 * time.Minute

// slowBefore says why a latency critical whose condition turned true before
// its fault began was not the fault's doing: the store was already slow
// then, by the suite's own measure (the target's successful samples of that
// op above a critical bound before the fault, from the rule's 5m window
// before the condition turned true, at least the steadyWindow; on CI's
// loaded 2 cores a JVM store restarted minutes earlier can stay slow that
// long). "" when the condition began with the fault or later, or no slow
// sample of that op came before it: the row fails as before.
func (s *suite) slowBefore(e episode, f *fault) string {
	if e.name() != generate.AlertLatencyAboveBaseline || e.severity() != "critical" || e.Active.IsZero() || !e.Active.Before(f.start) {
		return ""
	}
	var tg *target
	s.d.mu.Lock()
	for _, x := range s.d.targets {
		if x.name == e.Labels["target"] {
			tg = x
		}
	}
	s.d.mu.Unlock()
	if tg == nil {
		return ""
	}
	// The window reaches back over the rule's own 5m from the condition
	// turning true: a condition true since before the suite's healthy
	// period began on samples the steadyWindow no longer holds (CI of 7
	// Dec: os-ref's search_phrase, slow on the JVM's first minute and
	// again after its restart, fired 5m on).
	window := max(steadyWindow, (f.start.Sub(e.Active) + latencyRuleWindow).Round(time.Second))
	expr := s.slowExpr(tg, window)
	if expr == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := queryAt(ctx, s.m.promURL, expr, fmt.Sprintf("&time=%d", f.start.Unix()))
	if err != nil {
		s.logf("slow before %s: %v", pager.AlertString(e.Labels), err)
		return ""
	}
	for _, x := range r {
		if x.Metric["op"] == e.Labels["op"] {
			return fmt.Sprintf("the condition held from %s, and %.0f %s samples were above the critical bound in the %s before the fault began: the store was already slow", fmtRel(e.Active.Sub(f.start)), x.val(), e.Labels["op"], window)
		}
	}
	return ""
}

func dueText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" +%d due", n)
}

func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func fmtOverrides() string {
	keys := make([]string, 0, len(forOverride))
	for k := range forOverride {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%s", strings.TrimPrefix(k, "Dbcanary"), forOverride[k]))
	}
	return strings.Join(parts, ", ")
}

// firedSummary lists the alerts of a row: name/severity, instance count,
// first firing time, and whether Alertmanager inhibited all of them.
func firedSummary(eps []episode, start time.Time) string {
	type group struct {
		first     time.Time
		n         int
		inhibited bool
		details   []string
	}
	groups := map[string]*group{}
	var keys []string
	for _, e := range eps {
		k := strings.TrimPrefix(e.name(), "Dbcanary") + "/" + e.severity()
		g := groups[k]
		if g == nil {
			g = &group{first: e.Fired, inhibited: true}
			groups[k] = g
			keys = append(keys, k)
		}
		g.n++
		g.inhibited = g.inhibited && e.SeenAM && !e.Unsuppressed
		var d []string
		for _, l := range []string{"op", "phase", "cause", "window"} {
			if v := e.Labels[l]; v != "" {
				d = append(d, v)
			}
		}
		if len(d) > 0 && len(g.details) < 4 && !slices.Contains(g.details, strings.Join(d, " ")) {
			g.details = append(g.details, strings.Join(d, " "))
		}
	}
	var out []string
	for _, k := range keys {
		g := groups[k]
		s := k
		if len(g.details) > 0 {
			s += " (" + strings.Join(g.details, ", ") + ")"
		}
		if g.n > 1 {
			s += fmt.Sprintf(" x%d", g.n)
		}
		s += " " + fmtRel(g.first.Sub(start))
		if g.inhibited {
			s += " inhibited"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// diagnose records what the target's metrics did during the fault: failures
// by cause and how dbcanary_target_up / _misconfigured moved.
func (s *suite) diagnose(ctx context.Context, f *fault) {
	end := f.reverted
	if end.IsZero() {
		end = time.Now()
	}
	secs := int(end.Sub(f.start).Seconds()) + 2
	at := fmt.Sprintf("&time=%d", end.Unix())
	sel := fmt.Sprintf(`{target=%q}`, f.key)
	var parts []string
	if r, err := queryAt(ctx, s.m.promURL, fmt.Sprintf(`sum by (cause) (increase(dbcanary_op_failures_total%s[%ds])) > 0.5`, sel, secs), at); err == nil {
		sort.Slice(r, func(i, j int) bool { return r[i].Metric["cause"] < r[j].Metric["cause"] })
		var c []string
		for _, x := range r {
			c = append(c, fmt.Sprintf("%s %.0f", x.Metric["cause"], x.val()))
		}
		if len(c) > 0 {
			parts = append(parts, "failures: "+strings.Join(c, ", "))
		}
	}
	for _, q := range []struct{ label, expr string }{
		{"target_up changes", fmt.Sprintf(`changes(dbcanary_target_up%s[%ds])`, sel, secs)},
		{"target_up min", fmt.Sprintf(`min_over_time(dbcanary_target_up%s[%ds])`, sel, secs)},
		{"misconfigured max", fmt.Sprintf(`max_over_time(dbcanary_target_misconfigured%s[%ds])`, sel, secs)},
	} {
		if r, err := queryAt(ctx, s.m.promURL, q.expr, at); err == nil && len(r) > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", q.label, r[0].val()))
		}
	}
	if len(parts) > 0 {
		f.notes = append(f.notes, "during the fault: "+strings.Join(parts, ", "))
	}
}

// restartMargin: a restart within this of a threshold (TargetDown's `for:`)
// is on it, and either outcome is right.
const restartMargin = 10 * time.Second

// burnNear: a fast-burn condition whose ratio stayed under this many times
// its threshold was on the threshold (increase() extrapolates at the
// window's edges), and either outcome is right.
const burnNear = 1.1

var thresholdRe = regexp.MustCompile(`> ([0-9.]+)`)

// restartBurn sets what a short restart must page from what its outage cost
// the error budget, as Prometheus measured it. An outage whose failed ops are
// more than 1.44 % of an hour's expected ops (about 52 s of a target failing
// every op) spends 2 % of the 30-day budget and pages DbcanaryErrorBudgetBurn
// (1h) once, as the shipped rules mean to, even though TargetDown's `for:`
// did not run out (docs/page-quality.md); a shorter one pages nothing. The
// row then waits until that alert has fired and paged, or its condition no
// longer holds, so that the row after it is not blamed for it (CI of 7 Dec:
// a fast burn true since a 1m05s Cassandra restart fired 13-27 s into the
// stop row that followed).
func (s *suite) restartBurn(ctx context.Context, f *fault, upAt time.Time) {
	// A restart as long as TargetDown's for: may have paged as down
	// (mayPage): the burn rules hold back while TargetDown fires.
	if s.firedOn(generate.AlertTargetDown, f.key, f.start) {
		f.notes = append(f.notes, "TargetDown fired, which holds the burn rules back")
		return
	}
	var held *generate.Rule
	var ratio float64
	for i, r := range s.alertRules {
		if r.Alert != generate.AlertErrorBudgetBurn || r.Labels["severity"] != "critical" {
			continue
		}
		vals, err := queryMax(ctx, s.m.promURL, r.Expr, f.start, time.Now(), 5*time.Second)
		if err != nil {
			f.fail("the fast burn's condition: %v", err)
			return
		}
		for k, v := range vals {
			if held == nil && strings.Contains(k, "target="+f.key+",") {
				held, ratio = &s.alertRules[i], v
			}
		}
	}
	if held == nil {
		f.notes = append(f.notes, "failed ops under every critical burn rate")
		return
	}
	m := thresholdRe.FindStringSubmatch(held.Expr)
	if m == nil {
		f.fail("no threshold in %s (window %s): %s", held.Alert, held.Labels["window"], held.Expr)
		return
	}
	thr, _ := strconv.ParseFloat(m[1], 64)
	f.notes = append(f.notes, fmt.Sprintf("failed ops %.2f %% of the %s window's (critical burn above %.2f %%)", 100*ratio, held.Labels["window"], 100*thr))
	if ratio >= burnNear*thr {
		f.expect, f.expectSev = generate.AlertErrorBudgetBurn, "critical"
		// The condition turns true while the target is still down or at
		// the first scrapes after: the outage, then `for:`, then detect.
		f.budget = (upAt.Sub(f.start) + s.forOf[generate.AlertErrorBudgetBurn+":critical"] + detect[generate.AlertTargetDown]).Round(time.Second)
		s.logf("%s: the restart burnt the error budget: %s", f.key, f.notes[len(f.notes)-1])
		if _, ok := s.waitAlert(f); ok {
			s.waitPage(f)
		}
		return
	}
	// On the threshold: wait until it has fired and paged, or its
	// condition is gone.
	f.mayPage = append(f.mayPage, generate.AlertErrorBudgetBurn)
	deadline := time.Now().Add(6 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s.firedOn(generate.AlertErrorBudgetBurn, f.key, f.start) {
			s.waitPageOf(f, generate.AlertErrorBudgetBurn)
			return
		}
		r, err := query(ctx, s.m.promURL, held.Expr)
		if err == nil && !slices.ContainsFunc(r, func(x promSample) bool { return x.Metric["target"] == f.key }) {
			return
		}
		time.Sleep(5 * time.Second)
	}
	f.fail("the fast burn's condition on %s still held 6m after the restart", f.key)
}

// firedOn says whether a critical of that name fired on the target since t.
func (s *suite) firedOn(name, target string, since time.Time) bool {
	_, ok := s.fired(name, "critical", target, since)
	return ok
}
