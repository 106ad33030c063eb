//go:build integration

package deploy

// alerts/alertmanager.yml and the chart's AlertmanagerConfig, checked by the
// real amtool and exercised by a real Alertmanager of this test's own.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/dbcanary/dbcanary/test/stack"
)

var (
	amInstallOnce sync.Once
	amInstallErr  error
)

// amtool returns Debian's amtool, installed with Alertmanager by test/stack/alertmanager.sh.
func amtool(t *testing.T) string {
	t.Helper()
	amInstallOnce.Do(func() { _, amInstallErr = stack.Script("alertmanager", "install") })
	if amInstallErr != nil {
		t.Fatalf("installing Alertmanager: %v", amInstallErr)
	}
	p, err := exec.LookPath("amtool")
	if err != nil {
		t.Fatalf("amtool is needed (Debian package prometheus-alertmanager): %v", err)
	}
	return p
}

// writeAMConfig writes an Alertmanager config to a temp file.
func writeAMConfig(t *testing.T, c amConfig) string {
	t.Helper()
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func checkConfigAmtool(t *testing.T, file string) {
	t.Helper()
	out, err := exec.Command(amtool(t), "check-config", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("amtool check-config %s: %v\n%s", file, err, out)
	}
}

// TestAlertmanagerConfigValid: alerts/alertmanager.yml and the config the
// chart's AlertmanagerConfig stands for both pass amtool check-config, and
// amtool routes each severity to its receiver.
func TestAlertmanagerConfigValid(t *testing.T) {
	checkConfigAmtool(t, amFile)
	fromChart, _ := chartAlertmanagerConfig(t)
	checkConfigAmtool(t, writeAMConfig(t, fromChart))

	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{[]string{"alertname=DbcanaryTargetDown", "severity=critical", "target=rabbitmq-a", "backend=rabbitmq"}, "pager"},
		{[]string{"alertname=DbcanaryDataIntegrityFailure", "severity=critical", "target=s3-b", "backend=s3"}, "pager"},
		{[]string{"alertname=DbcanaryErrorRatioHigh", "severity=warning", "target=rabbitmq-a", "backend=rabbitmq"}, "ticket"},
	} {
		args := append([]string{"config", "routes", "test", "--config.file=" + amFile}, tc.labels...)
		out, err := exec.Command(amtool(t), args...).Output()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("amtool %s: %v %q, want %s", strings.Join(args, " "), err, out, tc.want)
		}
	}
}

// startAlertmanager runs a private Alertmanager on a free 127.0.0.1 port
// (clustering off), stopped by PID when the test ends; it returns its URL.
func startAlertmanager(t *testing.T, config string) string {
	t.Helper()
	amtool(t) // installs the package
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+config, "--storage.path="+t.TempDir(),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("alertmanager log:\n%s", logs.String())
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("alertmanager on %s not ready: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// labelKey is a label set as one comparable string.
func labelKey(ls map[string]string) string {
	var kv []string
	for k, v := range ls {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// webhook records the alerts each receiver was notified of.
type webhook struct {
	mu            sync.Mutex
	notifications int
	notified      map[string]bool // receiver + label set
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var msg struct {
		Alerts []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notifications++
	for _, a := range msg.Alerts {
		w.notified[strings.TrimPrefix(r.URL.Path, "/")+" "+labelKey(a.Labels)] = true
	}
}

func (w *webhook) snapshot() (int, map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[string]bool{}
	for k := range w.notified {
		m[k] = true
	}
	return w.notifications, m
}

func postAlerts(t *testing.T, url string, alerts []map[string]string) {
	t.Helper()
	var body []map[string]any
	for _, ls := range alerts {
		body = append(body, map[string]any{"labels": ls, "startsAt": time.Now().UTC().Format(time.RFC3339)})
	}
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/api/v2/alerts", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("posting alerts: %s %s", resp.Status, msg)
	}
}

// alertStates maps each alert's label set to its state (active, suppressed, unprocessed).
func alertStates(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url + "/api/v2/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, a := range alerts {
		states[labelKey(a.Labels)] = a.Status.State
	}
	return states
}

// amAlert is one alert of an inhibition scenario.
type amAlert struct {
	labels map[string]string
	first  bool   // posted, and stored by Alertmanager, before the others (a cause fires before its symptoms)
	want   string // active or suppressed
}

func alert(name, severity string, kv ...string) map[string]string {
	ls := map[string]string{"alertname": name, "severity": severity}
	for i := 0; i+1 < len(kv); i += 2 {
		ls[kv[i]] = kv[i+1]
	}
	return ls
}

func cause(ls map[string]string) amAlert  { return amAlert{labels: ls, first: true, want: "active"} }
func paged(ls map[string]string) amAlert  { return amAlert{labels: ls, want: "active"} }
func silent(ls map[string]string) amAlert { return amAlert{labels: ls, want: "suppressed"} }

// Label sets as the shipped rules produce them: target alerts carry target and
// backend (op where per op); scrape-level ones carry instance and job.
var (
	rmq       = []string{"target", "rabbitmq-a", "backend", "rabbitmq"}
	rmqOn1    = append(slices.Clone(rmq), "instance", "10.0.0.1:19190", "job", "dbcanary")
	s3        = []string{"target", "s3-b", "backend", "s3"}
	s3On2     = append(slices.Clone(s3), "instance", "10.0.0.2:19190", "job", "dbcanary")
	cassandra = []string{"target", "cassandra-c", "backend", "cassandra"}
)

func with(base []string, kv ...string) []string { return append(slices.Clone(base), kv...) }

// TestAlertmanagerInhibition loads alerts/alertmanager.yml (receivers pointed at
// a local webhook, group_wait cut to 1s) into a real Alertmanager per scenario
// and checks which alerts it suppresses and which reach the pager or a ticket.
func TestAlertmanagerInhibition(t *testing.T) {
	for _, sc := range []struct {
		name   string
		alerts []amAlert
		pages  int // notifications expected in all, when checked (0: not checked)
	}{
		{"rabbitmq outage of issue 16 is one page", []amAlert{
			cause(alert("DbcanaryTargetDown", "critical", rmqOn1...)),
			silent(alert("DbcanaryErrorBudgetBurn", "critical", with(rmq, "window", "1h")...)),
			silent(alert("DbcanaryErrorBudgetBurn", "critical", with(rmq, "window", "6h")...)),
			silent(alert("DbcanaryErrorRatioHigh", "warning", with(rmq, "op", "consume")...)),
			silent(alert("DbcanaryErrorRatioHigh", "warning", with(rmq, "op", "publish")...)),
		}, 1},
		{"a down target silences its symptoms, not data integrity nor other targets", []amAlert{
			cause(alert("DbcanaryTargetDown", "critical", rmqOn1...)),
			silent(alert("DbcanaryCanaryStale", "warning", with(rmqOn1, "op", "consume")...)),
			silent(alert("DbcanaryLatencyAboveBaseline", "critical", with(rmq, "op", "publish", "figure", "jmap-p99")...)),
			silent(alert("DbcanaryBacklog", "warning", with(rmq, "op", "publish")...)),
			silent(alert("DbcanaryLatencyDrift", "warning", with(rmq, "op", "publish")...)),
			paged(alert("DbcanaryDataIntegrityFailure", "critical", with(rmq, "op", "consume", "cause", "lost")...)),
			paged(alert("DbcanaryErrorRatioHigh", "warning", with(cassandra, "op", "read")...)),
		}, 0},
		{"a misconfigured target pages as misconfigured only", []amAlert{
			cause(alert("DbcanaryTargetMisconfigured", "critical", s3...)),
			silent(alert("DbcanaryTargetDown", "critical", s3On2...)),
			silent(alert("DbcanaryErrorBudgetBurn", "critical", with(s3, "window", "1h")...)),
			silent(alert("DbcanaryErrorRatioHigh", "warning", with(s3, "op", "put")...)),
			paged(alert("DbcanaryTargetDown", "critical", rmqOn1...)),
		}, 0},
		{"an unscrapable exporter silences what it reports", []amAlert{
			cause(alert("DbcanaryExporterDown", "critical", "instance", "10.0.0.1:19190", "job", "dbcanary")),
			silent(alert("DbcanaryTargetDown", "critical", rmqOn1...)),
			silent(alert("DbcanaryConfigReloadFailed", "warning", "instance", "10.0.0.1:19190", "job", "dbcanary")),
			paged(alert("DbcanaryTargetDown", "critical", s3On2...)),
			paged(alert("DbcanaryConfigReloadFailed", "warning", "instance", "10.0.0.2:19190", "job", "dbcanary")),
		}, 0},
		{"an absent exporter silences every other dbcanary alert", []amAlert{
			cause(alert("DbcanaryExporterAbsent", "critical", "job", "dbcanary")),
			silent(alert("DbcanaryTargetDown", "critical", rmqOn1...)),
			silent(alert("DbcanaryDataIntegrityFailure", "critical", with(s3, "op", "get", "cause", "mismatch")...)),
			silent(alert("DbcanaryConfigReloadFailed", "warning", "instance", "10.0.0.2:19190", "job", "dbcanary")),
		}, 1},
		{"a critical alert silences its own warning", []amAlert{
			cause(alert("DbcanaryLatencyAboveBaseline", "critical", with(rmq, "op", "publish", "figure", "jmap-p99")...)),
			cause(alert("DbcanaryErrorBudgetBurn", "critical", with(rmq, "window", "1h")...)),
			silent(alert("DbcanaryLatencyAboveBaseline", "warning", with(rmq, "op", "publish", "figure", "jmap-p99")...)),
			paged(alert("DbcanaryLatencyAboveBaseline", "warning", with(rmq, "op", "consume", "figure", "jmap-p99")...)),
			silent(alert("DbcanaryErrorBudgetBurn", "warning", with(rmq, "window", "1d")...)),
			paged(alert("DbcanaryErrorBudgetBurn", "warning", with(cassandra, "window", "1d")...)),
		}, 0},
	} {
		t.Run(sc.name, func(t *testing.T) {
			hook := &webhook{notified: map[string]bool{}}
			srv := httptest.NewServer(hook)
			defer srv.Close()
			cfg := loadAMConfig(t)
			cfg.Route.Routes[0].GroupWait = "1s" // the test's only change to timings: notify at once
			for i := range cfg.Receivers {
				cfg.Receivers[i].WebhookConfigs = []amWebhook{{URL: srv.URL + "/" + cfg.Receivers[i].Name}}
			}
			url := startAlertmanager(t, writeAMConfig(t, cfg))

			var first, rest []map[string]string
			want := map[string]string{}
			wantNotified := map[string]bool{}
			for _, a := range sc.alerts {
				if a.first {
					first = append(first, a.labels)
				} else {
					rest = append(rest, a.labels)
				}
				want[labelKey(a.labels)] = a.want
				if a.want == "active" {
					receiver := "ticket"
					if a.labels["severity"] == "critical" {
						receiver = "pager"
					}
					wantNotified[receiver+" "+labelKey(a.labels)] = true
				}
			}
			postAlerts(t, url, first)
			waitUntil(t, "the causes are stored", func() (bool, string) {
				states := alertStates(t, url)
				for _, ls := range first {
					if _, ok := states[labelKey(ls)]; !ok {
						return false, fmt.Sprint(states)
					}
				}
				return true, ""
			})
			postAlerts(t, url, rest)

			waitUntil(t, "every alert in its expected state", func() (bool, string) {
				states := alertStates(t, url)
				var wrong []string
				for k, w := range want {
					if states[k] != w {
						wrong = append(wrong, fmt.Sprintf("%s is %q, want %s", k, states[k], w))
					}
				}
				slices.Sort(wrong)
				return len(wrong) == 0, strings.Join(wrong, "\n")
			})
			waitUntil(t, "every active alert notified", func() (bool, string) {
				_, got := hook.snapshot()
				var missing []string
				for k := range wantNotified {
					if !got[k] {
						missing = append(missing, k)
					}
				}
				return len(missing) == 0, strings.Join(missing, "\n")
			})
			time.Sleep(3 * time.Second) // 3 x group_wait: a suppressed alert would have been sent by now
			n, got := hook.snapshot()
			for k := range got {
				if !wantNotified[k] {
					t.Errorf("notified %s, which should be silenced", k)
				}
			}
			if sc.pages > 0 && n != sc.pages {
				t.Errorf("%d notifications, want %d", n, sc.pages)
			}
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s:\n%s", what, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
