//go:build integration

// Package e2e proves the generated rules and boards on real parts: a real
// Prometheus scrapes a real dbcanary engine probing a real RabbitMQ through a
// toxiproxy proxy, evaluates the generated rules (for:, windows and offsets
// scaled by 0.05) and sends alerts to a real Alertmanager.
package e2e

import (
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

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/generate"
	_ "github.com/dbcanary/dbcanary/probes/all" // every backend is probed, so every board's panels have data
	"github.com/dbcanary/dbcanary/test/stack"
)

var rmq, cas, ops, s3, toxi, prom, am stack.Env

func TestMain(m *testing.M) {
	rmq = stack.Must("rabbitmq")
	// make test keeps these running from the probes' own packages.
	cas = stack.Must("cassandra")
	ops = stack.Must("opensearch")
	s3 = stack.Must("minio")
	toxi = stack.Must("toxiproxy")
	prom = stack.Must("prometheus")
	am = stack.Must("alertmanager")
	stack.Exit(m.Run())
}

// timeScale shortens the rules: 5m windows become 15s, for: 10m becomes 30s.
const timeScale = 0.05

func TestAlertsEndToEnd(t *testing.T) {
	promURL := prom.Get(t, "DBCANARY_TEST_PROMETHEUS_URL")
	runAlertsEndToEnd(t, e2eMonitor{
		scrape: time.Second,
		amURL:  am.Get(t, "DBCANARY_TEST_ALERTMANAGER_URL"),
		// The stack's Prometheus (Debian's 2.42) reloads the test's config.
		load: func(t *testing.T, cfg string) string {
			if err := os.WriteFile(prom.Get(t, "DBCANARY_TEST_PROMETHEUS_CONFIG"), []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(promURL+"/-/reload", "", nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("prometheus reload: %v %v", err, resp)
			}
			resp.Body.Close()
			return promURL
		},
	})
}

// e2eMonitor is the Prometheus and Alertmanager one run of the end-to-end
// test uses.
type e2eMonitor struct {
	// scrape is the scrape and evaluation interval (a test interval: the
	// rules' windows and for: are scaled by timeScale).
	scrape time.Duration
	// global holds extra keys of the config's global section (flow style,
	// each with a leading ", ").
	global string
	// nativeHistograms: Prometheus stores native histograms (the run checks
	// that the native-only service-time histograms arrive).
	nativeHistograms bool
	amURL            string
	// load makes Prometheus use the config and returns its URL.
	load func(t *testing.T, cfg string) string
}

// runAlertsEndToEnd runs the healthy checks (boards, pint online) and the
// faults against one Prometheus and Alertmanager.
func runAlertsEndToEnd(t *testing.T, m e2eMonitor) {
	t0 := time.Now()
	root := stack.RepoRoot()
	amURL := m.amURL
	// Deadlines grow with the scrape interval: every window holds fewer,
	// later samples.
	slack := 20 * m.scrape

	// RabbitMQ behind a fault proxy on a free port.
	tc := toxiproxy.NewClient(toxi.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	upstream := "127.0.0.1:" + rmq.Get(t, "DBCANARY_TEST_RABBITMQ_PORT")
	if old, err := tc.Proxy("dbcanary-e2e-rabbitmq"); err == nil {
		_ = old.Delete()
	}
	proxy, err := tc.CreateProxy("dbcanary-e2e-rabbitmq", "127.0.0.1:0", upstream)
	if err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(func() { _ = proxy.Delete() })

	// state_dir: the ledger saves to disk, so dbcanary_ledger_last_save_successful
	// exists for pint's series check of DbcanaryLedgerNotSaved.
	h := enginetest.Start(t, fmt.Sprintf(`
global: {timeout: 2s, max_in_flight: 8, state_dir: %q}
targets:
  - name: rmq-e2e
    backend: rabbitmq
    ops:
      publish: {rate: 5}
      consume: {}
      ledger_write: {rate: 1}
      ledger_check: {rate: 1}
    rabbitmq:
      url: amqp://%s/
      username: %s
      password_file: %s
      connect_timeout: 2s
      heartbeat: 2s
      ledger: {ages: [10s]}
  - name: cas-e2e
    backend: cassandra
    timeout: 10s
    ops: {insert: {rate: 0.2}, read: {rate: 0.8}, read_miss: {rate: 0.5}}
    cassandra:
      hosts: [%q]
      port: %s
      local_dc: %s
      username: %s
      password_file: %s
      keyspace: dbcanary_e2e
      replication: {class: SimpleStrategy, replication_factor: 1}
  - name: cas-ycsb-e2e
    backend: cassandra
    timeout: 10s
    cassandra:
      hosts: [%q]
      port: %s
      local_dc: %s
      username: %s
      password_file: %s
      keyspace: dbcanary_e2e
      replication: {class: SimpleStrategy, replication_factor: 1}
      profile: ycsb_a
  - name: os-e2e
    backend: opensearch
    timeout: 10s
    opensearch:
      addresses: [%s]
      replicas: 0
  - name: s3-e2e
    backend: s3
    timeout: 20s
    ops:
      "*": {rate: 0.5}
    s3:
      endpoint: http://%s
      addressing: path
      bucket: dbcanary-e2e
      access_key_id_file: %s
      secret_access_key_file: %s
`, t.TempDir(), proxy.Listen, rmq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), rmq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"),
		cas.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"), cas.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"), cas.Get(t, "DBCANARY_TEST_CASSANDRA_DC"),
		cas.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), cas.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"),
		cas.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"), cas.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"), cas.Get(t, "DBCANARY_TEST_CASSANDRA_DC"),
		cas.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), cas.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"),
		ops.Get(t, "DBCANARY_TEST_OPENSEARCH_URL"),
		s3.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), s3.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), s3.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE")))
	h.Metrics.ReloadSuccess.Set(1)
	h.Metrics.ReloadTimestamp.SetToCurrentTime()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(h.Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// The generated rules, scaled, in a temp copy; Prometheus reloads its config.
	b, err := baseline.Load(filepath.Join(root, "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate.RuleFiles(b, generate.Options{TimeScale: timeScale})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "dbcanary-rules.yml")
	if err := os.WriteFile(rulesPath, files["dbcanary-rules.yml"], 0o644); err != nil {
		t.Fatal(err)
	}
	amHost := strings.TrimPrefix(amURL, "http://")
	cfg := fmt.Sprintf(`global: {scrape_interval: %[1]s, scrape_timeout: %[1]s, evaluation_interval: %[1]s%[2]s}
rule_files: [%[3]q]
alerting:
  alertmanagers: [{static_configs: [{targets: [%[4]q]}]}]
scrape_configs:
  - job_name: %[5]s
    static_configs: [{targets: [%[6]q]}]
`, promDuration(m.scrape), m.global, rulesPath, amHost, b.Policy.Job, ln.Addr().String())
	promURL := m.load(t, cfg)

	// Every target's series reach the recording rules, not only the first
	// target's: a Cassandra runner whose session connects a few seconds after
	// the broker's has no recorded series yet when the boards are checked.
	const targets = 5
	const s3Sizes = 4 // the default sizes: 4KiB, 128KiB, 1MiB, 8MiB, each with a get (first_byte, last_byte)
	waitFor(t, 90*time.Second+slack, "dbcanary scraped and recording rules producing p99 and error ratios for every target", func() (bool, string) {
		r := query(t, promURL, fmt.Sprintf(`%s{op="consume",quantile="0.99"}`, generate.RecLatencyQuantile))
		up := query(t, promURL, `up{job="dbcanary"} == 1`)
		rec := query(t, promURL, fmt.Sprintf(`count by (target) (%s)`, generate.RecOpErrorRatio))
		// Every S3 GET's phase histograms (the S3 latency rules read them;
		// an op's series appear when its runner starts, not all at once).
		ph := query(t, promURL, `count by (op, phase) (dbcanary_op_phase_seconds_bucket{backend="s3",le="+Inf"})`)
		return len(r) > 0 && len(up) > 0 && len(rec) == targets && len(ph) == 2*s3Sizes,
			fmt.Sprintf("p99 series %d, up %d, targets with recorded error ratios %d of %d, S3 phase histograms %d of %d", len(r), len(up), len(rec), targets, len(ph), 2*s3Sizes)
	})
	t.Logf("healthy after %s", time.Since(t0).Round(time.Second))
	if m.nativeHistograms {
		// Service time has native buckets only: stored as a native histogram
		// when Prometheus scrapes them (a classic +Inf-only histogram when not).
		waitFor(t, 30*time.Second+slack, "native histograms of service time stored", func() (bool, string) {
			r := query(t, promURL, `histogram_count(dbcanary_op_service_time_seconds{target="rmq-e2e",result="ok"})`)
			return len(r) > 0, fmt.Sprintf("%d native service-time histograms", len(r))
		})
	}
	if a := firing(t, amURL); len(a) > 0 {
		t.Logf("alerts active while healthy (startup): %v", a)
	}

	t.Run("dashboard queries", func(t *testing.T) { checkBoards(t, root, promURL) })
	t.Run("pint online", func(t *testing.T) { pintOnline(t, root, promURL) })

	// Fault 1: 600 ms of latency on every reply: publish confirms and deliveries
	// exceed the 400 ms JMAP p99 ceiling (warning), not the 2.5 s critical.
	if _, err := proxy.AddToxic("slow", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 600}); err != nil {
		t.Fatal(err)
	}
	tf := time.Now()
	waitAlert(t, amURL, 120*time.Second+slack, true, map[string]string{"alertname": generate.AlertLatencyAboveBaseline, "severity": "warning", "op": "publish", "target": "rmq-e2e"})
	t.Logf("latency warning reached Alertmanager %s after the toxic", time.Since(tf).Round(time.Second))
	if err := proxy.RemoveToxic("slow"); err != nil {
		t.Fatal(err)
	}
	tf = time.Now()
	waitAlert(t, amURL, 120*time.Second+slack, false, map[string]string{"alertname": generate.AlertLatencyAboveBaseline, "op": "publish"})
	t.Logf("latency alert resolved %s after removing the toxic", time.Since(tf).Round(time.Second))

	// Fault 2: cut the broker off: target down; the fast budget burn and the
	// error ratio warning stay quiet because the outage already paged as down.
	if err := proxy.Disable(); err != nil {
		t.Fatal(err)
	}
	tf = time.Now()
	want := map[string]string{"alertname": generate.AlertTargetDown, "target": "rmq-e2e", "severity": "critical"}
	waitAlert(t, amURL, 120*time.Second+slack, true, want)
	t.Logf("%s reached Alertmanager %s after the cut", want["alertname"], time.Since(tf).Round(time.Second))
	during := firing(t, amURL)
	t.Logf("alerts during the cut: %v", during)
	for _, a := range during {
		if strings.Contains(a, generate.AlertErrorBudgetBurn) && strings.Contains(a, "critical") || strings.Contains(a, generate.AlertErrorRatioHigh) {
			t.Errorf("the outage reached Alertmanager as %s besides %s: %v", a, generate.AlertTargetDown, during)
		}
	}
	if err := proxy.Enable(); err != nil {
		t.Fatal(err)
	}
	tf = time.Now()
	gone := map[string]string{"alertname": generate.AlertTargetDown, "target": "rmq-e2e"}
	waitAlert(t, amURL, 150*time.Second+slack, false, gone)
	t.Logf("%s resolved %s after restoring the broker", gone["alertname"], time.Since(tf).Round(time.Second))
	t.Logf("total %s; alerts left: %v", time.Since(t0).Round(time.Second), firing(t, amURL))
}

// pintOnline runs pint on the shipped rules (alerts/dbcanary-rules.yml) with
// the committed .pint.hcl plus test/e2e/pint-online.hcl, which names this
// Prometheus: the checks that query a Prometheus (series exist, label
// matching, counters under rate, ranges against the scrape interval) run on
// the series a real dbcanary exports for every backend. The binary is the one
// test/tools/pint.sh builds and caches.
func pintOnline(t *testing.T, root, promURL string) {
	script := filepath.Join(root, "test", "tools", "pint.sh")
	if out, err := exec.Command("bash", script, "install").CombinedOutput(); err != nil {
		t.Fatalf("pint.sh install: %v\n%s", err, out)
	}
	bin, err := exec.Command("bash", script, "path").Output()
	if err != nil {
		t.Fatalf("pint.sh path: %v", err)
	}
	var cfg []byte
	for _, f := range []string{filepath.Join(root, ".pint.hcl"), filepath.Join(root, "test", "e2e", "pint-online.hcl")} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg = append(append(cfg, data...), '\n')
	}
	cfgPath := filepath.Join(t.TempDir(), "pint.hcl")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(strings.TrimSpace(string(bin)), "--no-color", "--config", cfgPath, "lint", "--fail-on=warning", "alerts/dbcanary-rules.yml")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DBCANARY_PINT_PROMETHEUS_URL="+promURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pint with the checks that query Prometheus (%s): %v\n%s", promURL, err, out)
	}
	t.Logf("pint, checks that query Prometheus included: clean\n%s", out)
}

// checkBoards runs every panel query of every board against the real
// Prometheus: each must parse and return at least one series (every backend
// has a target in this test).
func checkBoards(t *testing.T, root, promURL string) {
	paths, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no boards: %v", err)
	}
	queries, withData := 0, 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var db struct {
			Templating struct {
				List []struct {
					Name  string          `json:"name"`
					Query json.RawMessage `json:"query"`
				} `json:"list"`
			} `json:"templating"`
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(data, &db); err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		for _, v := range db.Templating.List {
			var q struct{ Query string }
			if v.Name != "target" || json.Unmarshal(v.Query, &q) != nil {
				continue
			}
			// label_values(SELECTOR, target): the selector must find series.
			sel := boardVars.Replace(strings.TrimSuffix(strings.TrimPrefix(q.Query, "label_values("), ", target)"))
			if r := query(t, promURL, sel); len(r) == 0 {
				t.Errorf("%s: target variable query %q finds no series", name, sel)
			}
		}
		for _, panel := range db.Panels {
			for _, tg := range panel.Targets {
				expr := boardVars.Replace(tg.Expr)
				queries++
				if r := query(t, promURL, expr); len(r) == 0 {
					t.Errorf("%s: panel %q: query %q returns no series", name, panel.Title, expr)
				} else {
					withData++
				}
			}
		}
	}
	t.Logf("%d panel queries run on Prometheus; %d returned series", queries, withData)
}

// boardVars are the boards' query variables at their All value.
var boardVars = strings.NewReplacer("$target", ".*", "$cluster", ".*", "$vantage", ".*", "$instance", ".*")

type sample struct {
	Metric map[string]string `json:"metric"`
}

// query runs an instant query; any error (including a parse error) fails the test.
func query(t *testing.T, promURL, expr string) []sample {
	t.Helper()
	resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatalf("query %q: %v", expr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("query %q: %s %s", expr, r.Error, body)
	}
	return r.Data.Result
}

type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	Annotations map[string]string `json:"annotations"`
}

func alerts(t *testing.T, amURL string) []amAlert {
	t.Helper()
	resp, err := http.Get(amURL + "/api/v2/alerts?active=true&silenced=false&inhibited=false")
	if err != nil {
		t.Fatalf("alertmanager: %v", err)
	}
	defer resp.Body.Close()
	var out []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("alertmanager: %v", err)
	}
	return out
}

func firing(t *testing.T, amURL string) []string {
	var s []string
	for _, a := range alerts(t, amURL) {
		s = append(s, fmt.Sprintf("%s{op=%s,severity=%s}", a.Labels["alertname"], a.Labels["op"], a.Labels["severity"]))
	}
	return s
}

func matches(a amAlert, want map[string]string) bool {
	for k, v := range want {
		if a.Labels[k] != v {
			return false
		}
	}
	return true
}

// waitAlert waits until an alert matching want is active (present) or gone.
func waitAlert(t *testing.T, amURL string, timeout time.Duration, present bool, want map[string]string) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("alert %v present=%v in Alertmanager", want, present), func() (bool, string) {
		for _, a := range alerts(t, amURL) {
			if matches(a, want) {
				if present {
					for _, k := range []string{"summary", "description", "runbook_url"} {
						if a.Annotations[k] == "" || strings.Contains(a.Annotations[k], "{{") {
							t.Errorf("%v: annotation %s = %q", want, k, a.Annotations[k])
						}
					}
					t.Logf("  %s: %s", a.Labels["alertname"], a.Annotations["description"])
				}
				return present, ""
			}
		}
		return !present, strings.Join(firing(t, amURL), ", ")
	})
}

// promDuration formats a duration as Prometheus reads it (750ms, 3s).
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// waitFor polls every second, up to timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last: %s)", timeout, what, state)
		}
		time.Sleep(time.Second)
	}
}
