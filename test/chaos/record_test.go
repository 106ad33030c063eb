//go:build soakchaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/chaos/history"
	"github.com/dbcanary/dbcanary/test/pager"
	"github.com/dbcanary/dbcanary/test/stack"
)

// nemesis runs a schedule and writes the nemesis log.
type nemesis struct {
	t     *testing.T
	tp    *topology
	d     *daemon
	w     *history.Writer
	th    []generate.Threshold
	kinds map[string]fault
	t0    time.Time
}

type step struct {
	at     time.Duration
	p      history.Planned
	inject bool
}

// run injects and reverts the schedule's faults at their times (a revert
// before an injection due at the same moment), in the test's goroutine.
func (n *nemesis) run(ctx context.Context, sched []history.Planned) {
	var steps []step
	for _, p := range sched {
		steps = append(steps, step{p.At, p, true}, step{p.End(), p, false})
	}
	sort.SliceStable(steps, func(i, j int) bool {
		return steps[i].at < steps[j].at || steps[i].at == steps[j].at && !steps[i].inject && steps[j].inject
	})
	for _, s := range steps {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(n.t0.Add(s.at))):
		}
		f := n.kinds[s.p.Kind]
		act, phase := f.revert, history.PhaseRevert
		if s.inject {
			act, phase = f.inject, history.PhaseInject
		}
		detail, err := act(ctx, n, s.p)
		e := history.Event{Seq: s.p.Seq, Kind: s.p.Kind, Target: s.p.Target, Phase: phase, At: time.Now(), Detail: detail}
		if s.inject {
			e.Pages, e.Budget = s.p.Pages, history.Duration(s.p.Budget)
		}
		if err != nil {
			e.Error = err.Error()
		}
		logf("+%s %s #%d %s: %s %s", time.Since(n.t0).Round(time.Second), phase, s.p.Seq, s.p.Kind, detail, e.Error)
		if err := n.w.Append(history.FileNemesis, e); err != nil {
			n.t.Errorf("nemesis log: %v", err)
		}
	}
}

// latencyX4 is 4 x the p99 figure of the target's primary alerted op (its
// first critical threshold), as the page-quality suite's latency fault. A
// calibrated figure pages at 5 x (calibrate's critical factor), past 4 x:
// when 4 x the figure is not a quarter above the critical bound, the fault
// adds 1.5 x the bound instead, so that it pages as the shipped one does.
func (n *nemesis) latencyX4(target, backend string) (time.Duration, string, error) {
	i := slices.IndexFunc(n.th, func(th generate.Threshold) bool {
		return th.Backend == backend && th.Severity == "critical" &&
			(th.Target == target || th.Target == "" && !slices.Contains(th.ExcludeTargets, target))
	})
	if i < 0 {
		return 0, "", fmt.Errorf("no critical latency threshold for %s (%s) in the baseline", target, backend)
	}
	th := n.th[i]
	lat := time.Duration(4 * th.Figure.Seconds() * float64(time.Second)).Round(time.Millisecond)
	what := fmt.Sprintf("4 x the %s %s %s figure (critical bound %gs)", th.Op, th.Phase, th.Figure.Stat, th.Bound)
	if lat.Seconds() < 1.25*th.Bound {
		lat = time.Duration(1.5 * th.Bound * float64(time.Second)).Round(time.Millisecond)
		what = fmt.Sprintf("1.5 x the %s %s critical bound %gs (%s figure %gs x %g)", th.Op, th.Phase, th.Bound, th.Figure.Stat, th.Figure.Seconds(), th.Factor)
	}
	return lat, fmt.Sprintf("latency +%s on every reply = %s", lat, what), nil
}

// shippedRules are alerts/dbcanary-rules.yml as shipped, and the baseline
// they come from.
func shippedRules(t *testing.T) (*baseline.File, []byte) {
	root := stack.RepoRoot()
	b, err := baseline.Load(filepath.Join(root, "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(root, "alerts", "dbcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return b, rules
}

// sampler scrapes dbcanary's /metrics every interval into samples.jsonl.
func sample(ctx context.Context, t *testing.T, addr string, w *history.Writer, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			if s, err := scrape(ctx, addr); err == nil {
				if err := w.Append(history.FileSamples, s); err != nil {
					t.Errorf("samples: %v", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// scrape reads one Sample from dbcanary's text exposition (history.ReadScrape).
func scrape(ctx context.Context, addr string) (history.Sample, error) {
	s := history.Sample{At: time.Now(), LedgerLost: map[string]float64{}, Load: stack.LoadAverage()}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	err = history.ReadScrape(resp.Body, &s)
	return s, err
}

// writeNotes writes every notification the webhook received, and the
// pages due at the end.
func writeNotes(ctx context.Context, w *history.Writer, al *pager.Alerting, end time.Time) error {
	sent := al.Hook.All()
	due, err := dueNotes(ctx, al.AlertmanagerURL, sent, end)
	if err != nil {
		return err
	}
	for _, n := range sent {
		var alerts []string
		var since time.Time // the newest firing alert's start
		for _, a := range n.Alerts {
			alerts = append(alerts, a.Status+" "+pager.AlertString(a.Labels))
			if n.Status == "firing" && a.Status == "firing" && a.StartsAt.After(since) {
				since = a.StartsAt
			}
		}
		if err := w.Append(history.FileNotifications, history.Note{At: n.At, Receiver: n.Receiver, Status: n.Status,
			GroupKey: n.GroupKey, GroupLabels: n.GroupLabels, Alerts: alerts, Since: since}); err != nil {
			return err
		}
	}
	for _, n := range due { // last: they page after everything sent
		if err := w.Append(history.FileNotifications, n); err != nil {
			return err
		}
	}
	return nil
}

// mountStateDir mounts a small tmpfs (16 MiB) as the ledger's state
// directory, so the nemesis can fill it; unmounted at the end.
func mountStateDir(t *testing.T, dir string) string {
	p := filepath.Join(dir, "state")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", p).CombinedOutput(); err != nil {
		t.Fatalf("mount a 16 MiB tmpfs on %s for the state-dir-full fault (make soak-chaos runs as root): %v: %s", p, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", p).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", p, err, out)
		}
	})
	return p
}

// getText GETs a URL's body.
func getText(ctx context.Context, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// dueNotes are the pager groups Alertmanager holds at the end with active
// alerts (neither inhibited nor silenced): each not notified yet pages at
// its group's next flush. They carry the group key of the group's earlier
// notifications, so that an open incident is not counted twice.
func dueNotes(ctx context.Context, amURL string, sent []pager.Notification, end time.Time) ([]history.Note, error) {
	body, err := getText(ctx, amURL+"/api/v2/alerts/groups?active=true&silenced=false&inhibited=false")
	if err != nil {
		return nil, err
	}
	var groups []struct {
		Labels   map[string]string `json:"labels"`
		Receiver struct {
			Name string `json:"name"`
		} `json:"receiver"`
		Alerts []json.RawMessage `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(body), &groups); err != nil {
		return nil, fmt.Errorf("alertmanager groups: %w", err)
	}
	var out []history.Note
	for _, g := range groups {
		if g.Receiver.Name != pager.ReceiverPager || len(g.Alerts) == 0 {
			continue
		}
		key := "due:" + fmt.Sprint(g.Labels)
		for _, n := range sent {
			if n.Receiver == g.Receiver.Name && maps.Equal(n.GroupLabels, g.Labels) {
				key = n.GroupKey
			}
		}
		out = append(out, history.Note{At: end, Receiver: g.Receiver.Name, Status: history.StatusDue, GroupKey: key, GroupLabels: g.Labels})
	}
	return out, nil
}
