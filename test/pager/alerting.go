package pager

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// Alerting is the alerting path of a test's own: a Prometheus scraping
// dbcanary and evaluating rules, and a real Alertmanager running the
// shipped config whose receivers post to Hook. Both are started by
// test/stack/prometheus.sh and alertmanager.sh in a directory of the test's,
// on free ports, and stopped by PID when the test ends.
type Alerting struct {
	PromURL, AlertmanagerURL string
	Hook                     *Webhook
}

// AlertingOptions say what the Prometheus scrapes and evaluates.
type AlertingOptions struct {
	Dir     string   // the processes' stack directory
	Targets []string // dbcanary listen addresses (host:port), scraped as Job
	Job     string
	Rules   []byte // the rule file Prometheus evaluates
	// Scrape is the scrape and evaluation interval.
	Scrape time.Duration
	// Scale and MinWait scale the shipped routes' timings (ShippedConfig):
	// 0 or 1 keeps them as shipped.
	Scale   float64
	MinWait time.Duration
	// Logf, if not nil, gets a line per notification.
	Logf func(format string, args ...any)
}

// StartAlerting starts Alertmanager on the shipped config, then Prometheus.
func StartAlerting(t testing.TB, o AlertingOptions) *Alerting {
	t.Helper()
	a := &Alerting{Hook: NewWebhook(t, o.Logf)}
	amCfg := filepath.Join(o.Dir, "alertmanager-shipped.yml")
	if err := os.WriteFile(amCfg, ShippedConfig(t, a.Hook.URL, o.Scale, o.MinWait), 0o644); err != nil {
		t.Fatal(err)
	}
	am := stack.StartPrivate(t, "alertmanager", o.Dir, fmt.Sprintf("DBCANARY_ALERTMANAGER_PORT=%d", stack.FreePort(t)), "DBCANARY_ALERTMANAGER_CONFIG="+amCfg)
	a.AlertmanagerURL = am.Get(t, "DBCANARY_TEST_ALERTMANAGER_URL")
	rules := filepath.Join(o.Dir, "dbcanary-rules.yml")
	if err := os.WriteFile(rules, o.Rules, 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(o.Targets))
	for i, tg := range o.Targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	cfg := filepath.Join(o.Dir, "prometheus-config.yml")
	every := promDuration(o.Scrape)
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `global: {scrape_interval: %[1]s, scrape_timeout: %[1]s, evaluation_interval: %[1]s}
rule_files: [%[2]q]
alerting:
  alertmanagers: [{static_configs: [{targets: [%[3]q]}]}]
scrape_configs:
  - job_name: %[4]s
    static_configs: [{targets: [%[5]s]}]
`, every, rules, strings.TrimPrefix(a.AlertmanagerURL, "http://"), o.Job, strings.Join(quoted, ", ")), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := stack.StartPrivate(t, "prometheus", o.Dir, fmt.Sprintf("DBCANARY_PROMETHEUS_PORT=%d", stack.FreePort(t)), "DBCANARY_PROMETHEUS_CONFIG="+cfg)
	a.PromURL = prom.Get(t, "DBCANARY_TEST_PROMETHEUS_URL")
	return a
}

// promDuration writes d as Prometheus reads it (whole seconds or minutes).
func promDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", max(d/time.Second, 1))
}
