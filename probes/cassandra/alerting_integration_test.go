//go:build integration

package cassandra_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/stack"
)

// alerting is a Prometheus and an Alertmanager of this test's own (own
// directory and ports, started by the stack scripts, stopped by PID): it
// scrapes the ledger's metrics and evaluates the generated rules, scaled by
// 0.05 (the 5m window of DbcanaryDurabilityLoss becomes 15s).
type alerting struct {
	promURL, amURL string
}

// privateStack starts one stack script's server in dir with the given env.
func privateStack(t *testing.T, name, dir string, env ...string) stack.Env {
	t.Helper()
	script := func(action string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(stack.Dir(), name+".sh"), action)
		cmd.Env = append(append(os.Environ(), "DBCANARY_STACK_DIR="+dir), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := script("stop"); err != nil {
			t.Errorf("stop private %s: %v\n%s", name, err, out)
		}
	})
	if out, err := script("start"); err != nil {
		t.Fatalf("start private %s: %v\n%s", name, err, out)
	}
	out, err := script("env")
	if err != nil {
		t.Fatal(err)
	}
	e := stack.Env{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			e[k] = v
		}
	}
	return e
}

// startAlerting serves the ledger's metrics on a free port and starts a
// private Alertmanager and a Prometheus scraping them every second.
func startAlerting(t *testing.T) *alerting {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(testLedgers)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	dir := t.TempDir()
	am := privateStack(t, "alertmanager", dir, fmt.Sprintf("DBCANARY_ALERTMANAGER_PORT=%d", freePort(t)))
	amURL := am.Get(t, "DBCANARY_TEST_ALERTMANAGER_URL")

	b, err := baseline.Load(filepath.Join(stack.RepoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate.RuleFiles(b, generate.Options{TimeScale: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "dbcanary-rules.yml")
	if err := os.WriteFile(rules, files["dbcanary-rules.yml"], 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "prometheus-config.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
alerting:
  alertmanagers: [{static_configs: [{targets: [%q]}]}]
scrape_configs:
  - job_name: %s
    static_configs: [{targets: [%q]}]
`, rules, strings.TrimPrefix(amURL, "http://"), b.Policy.Job, ln.Addr().String()), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := privateStack(t, "prometheus", dir, fmt.Sprintf("DBCANARY_PROMETHEUS_PORT=%d", freePort(t)), "DBCANARY_PROMETHEUS_CONFIG="+cfg)
	return &alerting{promURL: prom.Get(t, "DBCANARY_TEST_PROMETHEUS_URL"), amURL: amURL}
}

// query runs an instant query and returns the number of series.
func (a *alerting) query(t *testing.T, expr string) int {
	t.Helper()
	resp, err := http.Get(a.promURL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0 // not up yet
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("query %q: %s", expr, body)
	}
	return len(r.Data.Result)
}

// waitScraped waits until Prometheus holds a target's ledger series (at
// zero), so the loss is an increase it can see.
func (a *alerting) waitScraped(t *testing.T, target string) {
	t.Helper()
	enginetest.WaitFor(t, 60*time.Second, "Prometheus to scrape the ledger series", func() bool {
		return a.query(t, fmt.Sprintf(`dbcanary_ledger_checks_total{target=%q,result="missing"}`, target)) > 0
	})
}

type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// waitAlert waits until Alertmanager holds an active alert with the labels
// and returns it.
func (a *alerting) waitAlert(t *testing.T, timeout time.Duration, want map[string]string) amAlert {
	t.Helper()
	var found amAlert
	enginetest.WaitFor(t, timeout, fmt.Sprintf("alert %v in Alertmanager", want), func() bool {
		resp, err := http.Get(a.amURL + "/api/v2/alerts?active=true")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var as []amAlert
		if err := json.NewDecoder(resp.Body).Decode(&as); err != nil {
			return false
		}
	next:
		for _, al := range as {
			for k, v := range want {
				if al.Labels[k] != v {
					continue next
				}
			}
			found = al
			return true
		}
		return false
	})
	return found
}
