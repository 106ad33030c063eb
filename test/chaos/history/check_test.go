package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)

func at(d string) time.Time {
	v, err := time.ParseDuration(d)
	if err != nil {
		panic(err)
	}
	return t0.Add(v)
}

var opts = Options{
	PageGrace:   2 * time.Minute,
	NotifyGrace: 7 * time.Minute,
	TicketGrace: 14 * time.Minute,
	Growth: []GrowthBound{
		{Metric: MetricRSS, Rel: 0.1, Abs: 8 << 20, Warmup: 2 * time.Minute, MinSpan: 5 * time.Minute},
		{Metric: MetricGoroutines, Rel: 0.1, Abs: 20, Warmup: 2 * time.Minute, MinSpan: 5 * time.Minute},
	},
}

func page(at time.Time, status, alert, target string) Note {
	return Note{At: at, Receiver: ReceiverPager, Status: status, GroupKey: alert + "/" + target,
		GroupLabels: map[string]string{"alertname": alert, "target": target}}
}

func flat(n int, step time.Duration, start float64) []Sample {
	var out []Sample
	for i := range n {
		out = append(out, Sample{At: t0.Add(time.Duration(i) * step), Start: start, RSS: 50 << 20, Goroutines: 120, Load: 1.5})
	}
	return out
}

// passing is a recorded run that passes: a node kill with no page, a store
// stopped with its one TargetDown page in budget (and its resolution within
// the grace), flat metrics, nothing left over.
func passing() History {
	return History{
		Start: t0, End: at("20m"),
		Events: []Event{
			{Seq: 1, Kind: "cas-kill9-one", Target: "cas", Phase: PhaseInject, At: at("2m")},
			{Seq: 2, Kind: "s3-stopped", Target: "s3", Phase: PhaseInject, At: at("3m"), Pages: []string{"DbcanaryTargetDown"}, Budget: Duration(4 * time.Minute)},
			{Seq: 1, Kind: "cas-kill9-one", Target: "cas", Phase: PhaseRevert, At: at("4m")},
			{Seq: 2, Kind: "s3-stopped", Target: "s3", Phase: PhaseRevert, At: at("8m")},
		},
		Notes: []Note{
			page(at("6m"), "firing", "DbcanaryTargetDown", "s3"),
			page(at("12m"), "resolved", "DbcanaryTargetDown", "s3"),
		},
		Samples:   flat(40, 30*time.Second, 1),
		Leftovers: []Leftover{{Store: "s3", Items: 3, Oldest: Duration(15 * time.Minute), Allow: Duration(24 * time.Hour)}},
	}
}

// A ticket about a fault's lingering symptom (a warning's for: 10m after a
// slow warm-up) comes up to TicketGrace after the revert and is the fault's;
// a page that late is not.
func TestCheckTicketGrace(t *testing.T) {
	h := passing()
	n := page(at("8m").Add(12*time.Minute), "firing", "DbcanaryLatencyAboveBaseline", "s3")
	n.Receiver = "ticket"
	h.Notes = append(h.Notes, n)
	h.End = at("30m")
	if r := Check(h, opts); r.Failed() {
		t.Errorf("a ticket 12m after its fault's revert failed the run:\n%s", r.Table(t0))
	}
	h.Notes[len(h.Notes)-1].Receiver = ReceiverPager
	if r := Check(h, opts); !r.Failed() {
		t.Errorf("a page 12m after its fault's revert passed:\n%s", r.Table(t0))
	}
}

func TestCheckPassing(t *testing.T) {
	r := Check(passing(), opts)
	tab := r.Table(t0)
	if r.Failed() {
		t.Fatalf("a passing history failed:\n%s", tab)
	}
	for _, want := range []string{"| s3-stopped | TargetDown ≤ 4m0s | 1 | 1 | 0 | 0 | 0 | 0 | 3m0s |", "| cas-kill9-one | no page | 1 | 1 | 0 | 0 | 0 | 0 | — |", "| verdict | **PASS** |", "| machine load average (1 min) while sampled | mean 1.5, highest 1.5 (40 samples) |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// TestCheckFailures feeds one failure of each kind into the passing history.
func TestCheckFailures(t *testing.T) {
	cases := map[string]struct {
		edit func(h *History)
		want string // in the table
	}{
		"missed": {func(h *History) { h.Notes = nil }, "| s3-stopped | TargetDown ≤ 4m0s | 1 | 0 | 0 | 1 | 0 |"},
		"late": {func(h *History) {
			h.Notes[0].At = at("7m30s")
		}, "| s3-stopped | TargetDown ≤ 4m0s | 1 | 0 | 1 | 0 | 0 |"},
		"page where none is expected": {func(h *History) {
			h.Notes = append(h.Notes, page(at("3m"), "firing", "DbcanaryErrorBudgetBurn", "cas"))
		}, "| cas-kill9-one | no page | 1 | 1 | 0 | 0 | 1 |"},
		"two pages for one incident": {func(h *History) {
			h.Notes = append(h.Notes, page(at("6m10s"), "firing", "DbcanaryErrorBudgetBurn", "s3"))
		}, "| s3-stopped | TargetDown ≤ 4m0s | 1 | 1 | 0 | 0 | 1 |"},
		"page outside every fault": {func(h *History) {
			h.Notes = append(h.Notes, page(at("18m"), "firing", "DbcanaryLatencyAboveBaseline", "os"))
		}, "| pages no fault owns | **1**: +18m0s pager firing LatencyAboveBaseline{target=os} |"},
		"page due at the end, outside every fault": {func(h *History) {
			n := page(at("20m"), StatusDue, "DbcanaryErrorBudgetBurn", "mq")
			h.Notes = append(h.Notes, n)
		}, "| pages no fault owns | **1**: +20m0s pager due ErrorBudgetBurn{target=mq} |"},
		"ticket past the ticket grace": {func(h *History) {
			n := page(at("8m").Add(15*time.Minute), "firing", "DbcanaryLatencyAboveBaseline", "s3")
			n.Receiver = "ticket"
			h.Notes = append(h.Notes, n)
		}, "| notifications outside every fault window and its grace | **1**:"},
		"ticket outside every window": {func(h *History) {
			n := page(at("19m"), "firing", "DbcanaryCanaryStale", "mq")
			n.Receiver = "ticket"
			h.Notes = append(h.Notes, n)
		}, "| notifications outside every fault window and its grace | **1**:"},
		"false loss (notification)": {func(h *History) {
			h.Notes = append(h.Notes, page(at("5m"), "firing", AlertDurabilityLoss, "s3"))
		}, "notified DbcanaryDurabilityLoss for s3"},
		"false loss (metrics)": {func(h *History) {
			h.Samples[30].LedgerLost = map[string]float64{"mq": 2}
		}, `dbcanary_ledger_checks_total{target="mq",result=~"missing|corrupted"} reached 2`},
		"RSS growth": {func(h *History) {
			for i := range h.Samples {
				h.Samples[i].RSS += float64(i) * (1 << 20)
			}
		}, "| rss_bytes flat | **FAIL**"},
		"goroutine growth": {func(h *History) {
			for i := range h.Samples {
				h.Samples[i].Goroutines += float64(i)
			}
		}, "| goroutines flat | **FAIL**"},
		"leftover past abandoned_after": {func(h *History) {
			h.Leftovers[0].Oldest = Duration(25 * time.Hour)
		}, "| canary data left in s3 | **FAIL**"},
		"fault never reverted":      {func(h *History) { h.Events = h.Events[:3] }, "never reverted"},
		"injection failed":          {func(h *History) { h.Events[0].Error = "kill: no such process" }, "| cas-kill9-one | no page | 1 | 0 | 0 | 0 | 0 | 1 |"},
		"too short to judge growth": {func(h *History) { h.Samples = h.Samples[:8] }, "not judged"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := passing()
			c.edit(&h)
			r := Check(h, opts)
			tab := r.Table(t0)
			if !r.Failed() {
				t.Errorf("passed:\n%s", tab)
			}
			if !strings.Contains(tab, c.want) {
				t.Errorf("table lacks %q:\n%s", c.want, tab)
			}
		})
	}
}

// A restarted dbcanary starts a new process life: its lower RSS is not a
// slope, and growth is judged on the longest life past its warm-up.
func TestGrowthPerProcess(t *testing.T) {
	s := flat(20, 30*time.Second, 1)
	for i, x := range flat(20, 30*time.Second, 2) {
		x.At = x.At.Add(10 * time.Minute)
		x.RSS = 20<<20 + float64(i)*(10<<10) // warm-up then flat-ish
		s = append(s, x)
	}
	g := growth(s, opts.Growth)
	for _, r := range g {
		if !r.OK {
			t.Errorf("%s: %+v", r.Metric, r)
		}
	}
}

func TestLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := passing()
	for _, e := range h.Events {
		if err := w.Append(FileNemesis, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range h.Notes {
		if err := w.Append(FileNotifications, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range h.Samples {
		if err := w.Append(FileSamples, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Append(FileLeftovers, h.Leftovers[0]); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir, h.Start, h.End)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := Check(got, opts).Table(t0), Check(h, opts).Table(t0); a != b {
		t.Errorf("a loaded history judges differently:\n%s\nwant\n%s", a, b)
	}
	if err := os.WriteFile(filepath.Join(dir, FileNemesis), []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, h.Start, h.End); err == nil || !strings.Contains(err.Error(), "nemesis.jsonl: line 1") {
		t.Errorf("a broken line: %v, want an error naming the file and line", err)
	}
}

// A store fails its leftover row when it could not be listed, holds an item
// older than allowed, or more items than it may.
func TestLeftoverOK(t *testing.T) {
	h := Duration(time.Hour)
	for _, c := range []struct {
		name string
		l    Leftover
		want bool
	}{
		{"empty", Leftover{Allow: h}, true},
		{"young items", Leftover{Items: 5, Oldest: h / 2, Allow: h}, true},
		{"an item older than allowed", Leftover{Items: 5, Oldest: 2 * h, Allow: h}, false},
		{"not listed", Leftover{Allow: h, Problem: "connection refused"}, false},
		{"more queues than the instance owns", Leftover{Items: 3, Allow: h, MaxItems: 2}, false},
		{"as many as it owns", Leftover{Items: 2, Allow: h, MaxItems: 2}, true},
	} {
		if got := c.l.OK(); got != c.want {
			t.Errorf("%s: OK() = %v, want %v", c.name, got, c.want)
		}
	}
}

// A target configured to lose (a transient ledger) owns its losses: the
// fault that made them expects the DurabilityLoss page, and neither the page
// nor the ledger's count fails the run; the same on another target does.
func TestCheckLossyTarget(t *testing.T) {
	h := passing()
	h.Events = append(h.Events,
		Event{Seq: 3, Kind: "mq-lossy-kill9", Target: "mq-lossy", Phase: PhaseInject, At: at("9m"), Pages: []string{AlertDurabilityLoss}, Budget: Duration(4 * time.Minute)},
		Event{Seq: 3, Kind: "mq-lossy-kill9", Target: "mq-lossy", Phase: PhaseRevert, At: at("14m")})
	h.Notes = append(h.Notes, page(at("11m"), "firing", AlertDurabilityLoss, "mq-lossy"), page(at("17m"), "resolved", AlertDurabilityLoss, "mq-lossy"))
	h.Samples[30].LedgerLost = map[string]float64{"mq-lossy": 3}
	o := opts
	o.Lossy = []string{"mq-lossy"}
	r := Check(h, o)
	tab := r.Table(t0)
	if r.Failed() {
		t.Fatalf("the expected loss of a lossy target failed the run:\n%s", tab)
	}
	for _, want := range []string{"| mq-lossy-kill9 | DurabilityLoss ≤ 4m0s | 1 | 1 | 0 | 0 | 0 | 0 | 2m0s |", "every target but mq-lossy, configured to lose) | 0 |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if r := Check(h, opts); !r.Failed() {
		t.Errorf("the same loss on a target not configured to lose passed:\n%s", r.Table(t0))
	}
}

// Notifications before the run's start come from the stack settling (the
// harness starts the run once no alert is pending or firing and every
// group it saw was resolved): the table lists them, no fault owns them, and
// they neither page nor fall outside a window; a loss among them still
// fails the run.
func TestCheckBeforeStart(t *testing.T) {
	h := passing()
	early := []Note{
		page(t0.Add(-9*time.Minute), "firing", "DbcanaryLatencyAboveBaseline", "cas"),
		page(t0.Add(-2*time.Minute), "resolved", "DbcanaryLatencyAboveBaseline", "cas"),
	}
	early[0].Receiver, early[1].Receiver = "ticket", "ticket"
	h.Notes = append(early, h.Notes...)
	r := Check(h, opts)
	tab := r.Table(t0)
	if r.Failed() {
		t.Errorf("notifications before the start failed the run:\n%s", tab)
	}
	if want := "| notifications before the run (while the stack settled) | 2: -9m0s ticket firing LatencyAboveBaseline{target=cas}; -2m0s ticket resolved LatencyAboveBaseline{target=cas} |"; !strings.Contains(tab, want) {
		t.Errorf("table lacks %q:\n%s", want, tab)
	}
	h.Notes = append([]Note{page(t0.Add(-time.Minute), "firing", AlertDurabilityLoss, "cas")}, h.Notes...)
	if r := Check(h, opts); !r.Failed() || len(r.Losses) != 1 {
		t.Errorf("a loss notified before the start passed: %v", r.Losses)
	}
}

// A notification belongs to a fault only if its alert began firing after
// the fault was injected: the 2-hour run of 6 Dec 17:15 had a cas `read`
// ticket whose alert fired at 18:23:59 (pending since 18:13:59, 9 minutes
// after two restarted nodes came back), sent at 18:24:29, 29 s into a
// cas-node-cut injected at 18:24:00, which the checker then counted as that
// fault's. Since is when the newest alert of the notification fired.
func TestCheckFiredBeforeFault(t *testing.T) {
	h := passing()
	h.End = at("40m")
	h.Events = append(h.Events,
		Event{Seq: 3, Kind: "cas-node-cut", Target: "cas", Phase: PhaseInject, At: at("30m")},
		Event{Seq: 3, Kind: "cas-node-cut", Target: "cas", Phase: PhaseRevert, At: at("33m")})
	n := page(at("30m30s"), "firing", "DbcanaryLatencyAboveBaseline", "cas")
	n.Receiver = "ticket"
	n.Since = at("30m").Add(-time.Second)
	h.Notes = append(h.Notes, n)
	r := Check(h, opts)
	if !r.Failed() || len(r.Outside) != 1 {
		t.Errorf("a ticket whose alert fired 1 s before the fault it arrived in was owned by it:\n%s", r.Table(t0))
	}
	h.Notes[len(h.Notes)-1].Since = at("30m").Add(time.Second)
	if r := Check(h, opts); r.Failed() {
		t.Errorf("a ticket whose alert fired 1 s into the fault failed the run:\n%s", r.Table(t0))
	}
	// A page too: fired before the fault, it is not the fault's page.
	h.Notes[len(h.Notes)-1].Receiver, h.Notes[len(h.Notes)-1].Since = ReceiverPager, at("30m").Add(-time.Second)
	if r := Check(h, opts); len(r.Unowned) != 1 {
		t.Errorf("a page whose alert fired before the fault was owned by it:\n%s", r.Table(t0))
	}
}
