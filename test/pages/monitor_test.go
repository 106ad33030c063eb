//go:build integration

package pages

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/pager"
	"github.com/dbcanary/dbcanary/test/stack"
)

// monitor is the alerting path under test: a real Prometheus scraping the
// daemon and evaluating the rules, a real Alertmanager with the shipped
// routing and inhibition, and the webhook its receivers post to.
type monitor struct {
	promURL, amURL string
	hook           *pager.Webhook
	rec            *recorder
}

// startMonitor starts Prometheus and Alertmanager (own processes, free ports,
// stopped by PID at the end) and the recorder polling both.
func startMonitor(t *testing.T, dir, daemonAddr, job string, scrape time.Duration, rules []byte) *monitor {
	t.Helper()
	m := &monitor{hook: pager.NewWebhook(t, t.Logf)}

	amAddr := freeAddr(t)
	amCfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(amCfg, pager.ShippedConfig(t, m.hook.URL, 1, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	am := startProc(t, "alertmanager", filepath.Join(dir, "alertmanager.log"), alertmanagerBin,
		"--config.file="+amCfg, "--storage.path="+filepath.Join(dir, "am-data"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=")
	m.amURL = "http://" + amAddr
	waitReady(t, am, m.amURL+"/-/ready", 30*time.Second)

	rulesPath := filepath.Join(dir, "dbcanary-rules.yml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	promCfg := filepath.Join(dir, "prometheus.yml")
	cfg := fmt.Sprintf(`global: {scrape_interval: %[1]s, scrape_timeout: %[1]s, evaluation_interval: %[1]s%[6]s}
rule_files: [%[2]q]
alerting:
  alertmanagers: [{static_configs: [{targets: [%[3]q]}]}]
scrape_configs:
  - job_name: %[4]s
    static_configs: [{targets: [%[5]q]}]
`, promDuration(scrape), rulesPath, amAddr, job, daemonAddr, prometheus3Global(t))
	if err := os.WriteFile(promCfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := startProc(t, "prometheus", filepath.Join(dir, "prometheus.log"), prometheusBin,
		"--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"),
		"--web.listen-address="+promAddr)
	m.promURL = "http://" + promAddr
	waitReady(t, prom, m.promURL+"/-/ready", 60*time.Second)

	poll := time.Second
	if scrape > 5*time.Second {
		poll = 5 * time.Second
	}
	m.rec = newRecorder(t, m.promURL, m.amURL, poll)
	return m
}

// prometheus3Global is the global config Prometheus 3.x gets: native
// histograms scraped (a scrape setting since 3.x made them stable) with the
// classic buckets the rules read kept beside them, as docs/alerts-dashboards.md
// asks of users. Empty for 2.x (Debian's 2.42 in make test: classic only).
func prometheus3Global(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(prometheusBin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", prometheusBin, err, out)
	}
	version := strings.SplitN(string(out), "\n", 2)[0]
	if !strings.Contains(version, "version 3.") {
		return ""
	}
	t.Logf("%s: native histograms scraped, classic buckets kept", version)
	return ", scrape_native_histograms: true, always_scrape_classic_histograms: true"
}

func promDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func labelKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + l[k] + ",")
	}
	return b.String()
}

// episode is one firing period of one alert instance (one label set), as
// Prometheus reported it, and what Alertmanager did with it.
type episode struct {
	Labels map[string]string
	Active time.Time // when its condition became true (Prometheus activeAt)
	Fired  time.Time // first poll that saw it firing
	Ended  time.Time // first poll that no longer saw it (zero while firing)
	// SeenAM: Alertmanager had it; Unsuppressed: Alertmanager showed it
	// active (neither inhibited nor silenced) at least once.
	SeenAM, Unsuppressed bool
}

func (e *episode) severity() string { return e.Labels["severity"] }
func (e *episode) name() string     { return e.Labels["alertname"] }

// recorder polls Prometheus's and Alertmanager's alert lists.
type recorder struct {
	promURL, amURL string
	mu             sync.Mutex
	open           map[string]*episode
	all            []*episode
	errs           int
	loadMax        float64 // highest 1-minute load average seen
	loadSum        float64
	loadN          int
	logf           func(string, ...any)
	start          time.Time
}

func newRecorder(t *testing.T, promURL, amURL string, every time.Duration) *recorder {
	r := &recorder{promURL: promURL, amURL: amURL, open: map[string]*episode{}, logf: t.Logf, start: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			r.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func (r *recorder) poll(ctx context.Context) {
	var pr struct {
		Data struct {
			Alerts []struct {
				Labels   map[string]string `json:"labels"`
				State    string            `json:"state"`
				ActiveAt time.Time         `json:"activeAt"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON(ctx, r.promURL+"/api/v1/alerts", &pr); err != nil {
		r.mu.Lock()
		r.errs++
		r.mu.Unlock()
		return
	}
	var am []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	amErr := getJSON(ctx, r.amURL+"/api/v2/alerts", &am)
	now := time.Now()
	load := stack.LoadAverage()
	r.mu.Lock()
	defer r.mu.Unlock()
	if load >= 0 {
		r.loadMax = max(r.loadMax, load)
		r.loadSum += load
		r.loadN++
	}
	seen := map[string]bool{}
	for _, a := range pr.Data.Alerts {
		if a.State != "firing" {
			continue
		}
		k := labelKey(a.Labels)
		seen[k] = true
		if r.open[k] == nil {
			e := &episode{Labels: a.Labels, Active: a.ActiveAt, Fired: now}
			r.open[k] = e
			r.all = append(r.all, e)
			r.logf("+%s firing: %s", now.Sub(r.start).Round(time.Second), pager.AlertString(a.Labels))
		}
	}
	for k, e := range r.open {
		if !seen[k] {
			e.Ended = now
			delete(r.open, k)
			r.logf("+%s resolved: %s (fired for %s)", now.Sub(r.start).Round(time.Second), pager.AlertString(e.Labels), now.Sub(e.Fired).Round(time.Second))
		}
	}
	if amErr != nil {
		r.errs++
		return
	}
	for _, a := range am {
		if e := r.open[labelKey(a.Labels)]; e != nil {
			e.SeenAM = true
			if a.Status.State == "active" {
				e.Unsuppressed = true
			}
		}
	}
}

// load returns the mean and highest 1-minute load average seen.
func (r *recorder) load() (mean, highest float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loadN == 0 {
		return 0, 0
	}
	return r.loadSum / float64(r.loadN), r.loadMax
}

// episodes returns a copy of every episode so far.
func (r *recorder) episodes() []episode {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]episode, len(r.all))
	for i, e := range r.all {
		out[i] = *e
	}
	return out
}

// amGroup is an Alertmanager aggregation group with its active (not
// inhibited, not silenced) alerts.
type amGroup struct {
	Receiver string
	Labels   map[string]string
	Alerts   []pager.Alert
}

// incidentKey identifies a group for a receiver, in notifications and in
// Alertmanager's group list alike.
func incidentKey(receiver string, groupLabels map[string]string) string {
	return receiver + "|" + labelKey(groupLabels)
}

// activeGroups lists Alertmanager's groups holding active alerts: each one
// not notified yet sends at its group's next flush unless it resolves first.
func (m *monitor) activeGroups(ctx context.Context) ([]amGroup, error) {
	var raw []struct {
		Labels   map[string]string `json:"labels"`
		Receiver struct {
			Name string `json:"name"`
		} `json:"receiver"`
		Alerts []struct {
			Labels      map[string]string `json:"labels"`
			StartsAt    time.Time         `json:"startsAt"`
			Fingerprint string            `json:"fingerprint"`
		} `json:"alerts"`
	}
	if err := getJSON(ctx, m.amURL+"/api/v2/alerts/groups?active=true&silenced=false&inhibited=false", &raw); err != nil {
		return nil, err
	}
	var out []amGroup
	for _, g := range raw {
		ag := amGroup{Receiver: g.Receiver.Name, Labels: g.Labels}
		for _, a := range g.Alerts {
			ag.Alerts = append(ag.Alerts, pager.Alert{Status: "firing", Labels: a.Labels, StartsAt: a.StartsAt, Fingerprint: a.Fingerprint})
		}
		if len(ag.Alerts) > 0 {
			out = append(out, ag)
		}
	}
	return out, nil
}
