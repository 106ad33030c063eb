//go:build soakchaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/chaos/history"
	"github.com/dbcanary/dbcanary/test/pager"
	"github.com/dbcanary/dbcanary/test/stack"
)

// scrapeEvery is the chart's ServiceMonitor interval: Prometheus scrapes
// and evaluates the shipped rules as a deployment does.
const scrapeEvery = history.ScrapeEvery

// plan shapes the schedule: 3 minutes of healthy run first, the last 4
// quiet (late and extra pages show there), same-store faults 7 minutes
// apart: the shipped rules keep a target's symptoms (latency, error ratio,
// burn) quiet for 5 minutes after its DbcanaryTargetDown stopped firing (about
// a minute after the revert), so
// a latency fault 2 minutes after an outage's end paged 3m22s late in the
// 2-hour run of 6 Dec, by design of the rules, not of the store.
var plan = history.Plan{Warmup: 3 * time.Minute, Tail: 4 * time.Minute, Separation: 7 * time.Minute,
	GapMin: 30 * time.Second, GapMax: 2 * time.Minute, Overlap: 0.5}

// checkOptions are the checker's stated tolerances for a run of length run
// (history.RunOptions says how each is derived).
func checkOptions(run time.Duration) history.Options {
	return history.RunOptions(run, targetMQLossy)
}

// settings are the run's knobs: CHAOS_DURATION (2h) and CHAOS_SEED (the
// time, printed, when not given).
func settings(t *testing.T) (time.Duration, uint64) {
	run := 2 * time.Hour
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Minute {
			t.Fatalf("CHAOS_DURATION=%q: want a duration of at least 10m, such as 20m or 2h", v)
		}
		run = d
	}
	seed := uint64(time.Now().UnixNano() % 1e9)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want a number, as a run prints it", v)
		}
		seed = s
	}
	return run, seed
}

// TestSoakChaos: the servers, dbcanary, the alerting path, the nemesis for
// CHAOS_DURATION, then the checker over what was recorded.
func TestSoakChaos(t *testing.T) {
	run, seed := settings(t)
	cat := catalogue()
	kinds := map[string]fault{}
	var ks []history.Kind
	for _, f := range cat {
		kinds[f.Name], ks = f, append(ks, f.Kind)
	}
	if err := history.Validate(ks); err != nil {
		t.Fatal(err)
	}
	sched := history.Schedule(seed, run, ks, plan)
	logf("seed %d, duration %s: replay with make soak-chaos SEED=%d DURATION=%s; the schedule:\n%s", seed, run, seed, run, history.Format(sched))
	if os.Getenv("CHAOS_PLAN_ONLY") == "1" {
		return // the schedule alone, nothing started
	}
	dir := filepath.Join(stack.MustArtefactDir("chaos"), fmt.Sprintf("%s-seed%d", time.Now().UTC().Format("20060102T150405"), seed))
	w, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	tp := startTopology(t)
	d := newDaemon(t, dir, mountStateDir(t, dir), tp)
	d.start()
	waitAllUp(t, d.addr, 5*time.Minute)
	thr := runThresholds(t, d)
	logf("thresholds: %s", thr.what)
	if err := os.WriteFile(filepath.Join(dir, "dbcanary-rules.yml"), thr.rules, 0o644); err != nil {
		t.Fatal(err)
	}
	al := pager.StartAlerting(t, pager.AlertingOptions{Dir: dir, Targets: []string{d.addr}, Job: thr.b.Policy.Job, Rules: thr.rules, Scrape: scrapeEvery, Logf: logf})
	th, err := generate.Thresholds(thr.b)
	if err != nil {
		t.Fatal(err)
	}
	logf("every target up; waiting for the steady state (no alert pending or firing for %s, every notified group resolved)", settleQuiet)
	took := settle(t, al)
	ctx := context.Background()
	t0 := time.Now()
	logf("settled in %s; the run starts (load average %.2f); records in %s", took.Round(time.Second), stack.LoadAverage(), dir)
	stopSampling := sample(ctx, t, d.addr, w, 15*time.Second)
	n := &nemesis{t: t, tp: tp, d: d, w: w, th: th, kinds: kinds, t0: t0}
	n.run(ctx, sched)
	time.Sleep(time.Until(t0.Add(run)))
	end := time.Now()
	stopSampling()
	d.stop()
	finish(t, dir, w, al, tp, t0, end, run, seed, thr.what)
}

// finish records what the run left, judges the history and writes the table.
func finish(t *testing.T, dir string, w *history.Writer, al *pager.Alerting, tp *topology, t0, end time.Time, run time.Duration, seed uint64, thresholds string) {
	if err := writeNotes(context.Background(), w, al, end); err != nil {
		t.Fatal(err)
	}
	for _, l := range leftovers(context.Background(), tp) {
		if err := w.Append(history.FileLeftovers, l); err != nil {
			t.Fatal(err)
		}
	}
	h, err := history.Load(dir, t0, end)
	if err != nil {
		t.Fatal(err)
	}
	r := history.Check(h, checkOptions(run))
	head := fmt.Sprintf("make soak-chaos SEED=%d DURATION=%s: %s to %s UTC, load average at the end %.2f\n\nThresholds: %s.\n\n",
		seed, run, t0.UTC().Format("2006-01-02 15:04"), end.UTC().Format("15:04"), stack.LoadAverage(), thresholds)
	table := head + r.Table(t0)
	if err := os.WriteFile(filepath.Join(dir, "table.md"), []byte(table), 0o644); err != nil {
		t.Error(err)
	}
	if out := os.Getenv("CHAOS_TABLE_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(table), 0o644)
	}
	logf("the checker's table (%s):\n%s", filepath.Join(dir, "table.md"), table)
	if r.Failed() {
		t.Errorf("the chaos run failed its checker: see the table above; replay with make soak-chaos SEED=%d DURATION=%s", seed, run)
	}
}

// waitAllUp waits until every target reports dbcanary_target_up 1.
func waitAllUp(t *testing.T, addr string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		s, err := scrapeUp(addr)
		if err == nil && len(s) > 0 && !strings.Contains(s, " 0") {
			return
		}
		last = s
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("targets not all up after %s: %s", timeout, last)
}

// scrapeUp lists dbcanary_target_up lines.
func scrapeUp(addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := getText(ctx, "http://"+addr+"/metrics")
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "dbcanary_target_up{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; "), err
}

// stop ends the daemon with SIGTERM (its S3 probes remove their objects)
// and waits until it is gone.
func (d *daemon) stop() {
	pid := d.pid()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(60 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
}
