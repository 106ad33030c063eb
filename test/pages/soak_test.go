//go:build integration && soakpages

package pages

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/pager"
	"github.com/dbcanary/dbcanary/test/stack"
)

// TestSoakPages (`make soak-pages`) runs the demo config's targets healthy
// for SOAK_DURATION (30m) with the rules exactly as shipped (no `for:`
// override), Prometheus scraping and evaluating at the chart's
// ServiceMonitor interval, and the shipped Alertmanager config, and counts
// the alerts that fired and the notifications sent (goal: 0).
func TestSoakPages(t *testing.T) {
	dur := envDuration(t, "SOAK_DURATION", 30*time.Minute)
	root := stack.RepoRoot()
	b, err := baseline.Load(filepath.Join(root, "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate.RuleFiles(b, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(root, "alerts", "dbcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(files["dbcanary-rules.yml"]) != string(shipped) {
		t.Errorf("alerts/dbcanary-rules.yml is not what the generator makes (run make generate)")
	}
	interval := chartScrapeInterval(t, root)

	dir := t.TempDir()
	d := newDaemon(t, dir)
	backends, err := everyBackend()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, be := range backends {
		names = append(names, d.addTarget(be, roleRef).name)
	}
	t0 := time.Now()
	d.start()
	m := startMonitor(t, dir, d.addr, b.Policy.Job, interval, shipped)
	m.rec.start = t0
	ctx := context.Background()
	if _, err := waitUp(ctx, m.promURL, names, 3*time.Minute); err != nil {
		t.Fatalf("%v\ndbcanary log:\n%s", err, d.proc.tail(4000))
	}
	t.Logf("every target up after %s; soaking for %s (scrape and evaluation every %s, shipped for: values)",
		time.Since(t0).Round(time.Second), dur, interval)
	time.Sleep(dur)

	eps := m.rec.episodes()
	notes := m.hook.All()
	var lines []string
	for _, e := range eps {
		state := "still firing"
		if !e.Ended.IsZero() {
			state = "fired for " + e.Ended.Sub(e.Fired).Round(time.Second).String()
		}
		lines = append(lines, fmt.Sprintf("  %s +%s (%s)", pager.AlertString(e.Labels), e.Fired.Sub(t0).Round(time.Second), state))
	}
	pages := 0
	for _, n := range notes {
		if n.Receiver == pager.ReceiverPager && n.Status == "firing" {
			pages++
		}
	}
	fmt.Printf("\nsoak-pages: %s healthy (demo config: %d store targets + %d other; scrape/evaluation %s; rules as shipped): %d alerts fired, %d notifications (%d to the pager)\n%s\n",
		dur, len(names), len(d.demoOthers), interval, len(eps), len(notes), pages, strings.Join(lines, "\n"))
	if len(eps) > 0 || len(notes) > 0 {
		t.Errorf("%d alerts fired and %d notifications were sent while every store was healthy (goal 0)", len(eps), len(notes))
	}
}

// chartScrapeInterval is the Helm chart's ServiceMonitor interval, the
// scrape interval dbcanary ships with.
func chartScrapeInterval(t *testing.T, root string) time.Duration {
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "dbcanary", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ServiceMonitor struct {
			Interval string `yaml:"interval"`
		} `yaml:"serviceMonitor"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	d, err := time.ParseDuration(v.ServiceMonitor.Interval)
	if err != nil {
		t.Fatalf("chart values serviceMonitor.interval %q: %v", v.ServiceMonitor.Interval, err)
	}
	return d
}
