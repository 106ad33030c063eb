//go:build integration

package tls

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/pki"
	"github.com/dbcanary/dbcanary/test/stack"
)

// firingAlert is one alert of Prometheus' /api/v1/alerts.
type firingAlert struct {
	Labels map[string]string
	State  string
}

// certAlerts runs a private Prometheus (the stack's, its own port and
// folder) with the shipped rules generated from the reference baseline —
// only the `for:` of the certificate alert cut to 0 so the test need not wait
// 15 minutes — scraping the daemon at daemonAddr, and returns the
// DbcanaryTLSCertificateExpiring alerts about target once one fires (or
// fails the test after 3 minutes).
func certAlerts(t *testing.T, daemonAddr, target string) []firingAlert {
	t.Helper()
	b, err := baseline.Load(filepath.Join(stack.RepoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	opt := generate.Options{BaselineName: "baselines/james-reference.yaml", For: map[string]time.Duration{generate.AlertTLSCertExpiring: 0}}
	rules, err := generate.Rules(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rules.Marshal(opt)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rulesPath, cfgPath := filepath.Join(dir, "rules.yml"), filepath.Join(dir, "prometheus.yml")
	pki.WriteFile(t, rulesPath, out)
	pki.WriteFile(t, cfgPath, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: dbcanary
    static_configs: [{targets: [%q]}]
`, rulesPath, daemonAddr)))
	promDir, err := os.MkdirTemp("", "dbcanary-tls-prom-")
	if err != nil {
		t.Fatal(err)
	}
	env := startPrivate(t, "prometheus", promDir, "DBCANARY_PROMETHEUS_CONFIG="+cfgPath, fmt.Sprintf("DBCANARY_PROMETHEUS_PORT=%d", stack.FreePort(t)))
	url := env["DBCANARY_TEST_PROMETHEUS_URL"] + "/api/v1/alerts"

	deadline := time.Now().Add(3 * time.Minute)
	for {
		var resp struct {
			Data struct{ Alerts []firingAlert }
		}
		body := tryGet(url)
		var mine []firingAlert
		if json.Unmarshal([]byte(body), &resp) == nil {
			for _, a := range resp.Data.Alerts {
				if a.Labels["alertname"] == generate.AlertTLSCertExpiring && a.Labels["target"] == target {
					mine = append(mine, a)
				}
			}
		}
		for _, a := range mine {
			if a.State == "firing" {
				return mine
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s about %s did not fire on the real Prometheus within 3 min; alerts: %s", generate.AlertTLSCertExpiring, target, body)
		}
		time.Sleep(time.Second)
	}
}
