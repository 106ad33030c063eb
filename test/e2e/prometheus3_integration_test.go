//go:build integration

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The end-to-end alert test on another Prometheus (make
// test-compat-e2e-prometheus3 sets DBCANARY_E2E_PROMETHEUS_BIN to the
// Prometheus 3.x test/tools/prometheus3.sh builds): each run starts its own
// Prometheus and Alertmanager (free ports, stopped by PID), so no alert of one
// run is still active in the next.
const (
	envPrometheusBin = "DBCANARY_E2E_PROMETHEUS_BIN"
	// envRuns lists the runs: <field scrape interval>/<native|classic>, comma
	// separated. The field interval is scaled like the rules (timeScale): a
	// 1m interval scrapes every 3s against 15s windows for 5m ones, the same
	// samples per window as in the field.
	envRuns     = "DBCANARY_E2E_RUNS"
	defaultRuns = "15s/native,1m/native"
	// alertmanagerBin is the binary test/stack/alertmanager.sh installs.
	alertmanagerBin = "/usr/bin/prometheus-alertmanager"
)

// TestAlertsEndToEndOtherPrometheus runs TestAlertsEndToEnd's checks (every
// expected alert fires and resolves, every board query returns data, pint's
// online checks) on the Prometheus binary DBCANARY_E2E_PROMETHEUS_BIN names,
// at field scrape intervals and with native histograms scraped (classic
// buckets kept: always_scrape_classic_histograms, docs/alerts-dashboards.md).
func TestAlertsEndToEndOtherPrometheus(t *testing.T) {
	bin := os.Getenv(envPrometheusBin)
	if bin == "" {
		t.Skipf("%s unset: make test-compat-e2e-prometheus3 runs this on Prometheus 3.x (make test runs TestAlertsEndToEnd on Debian's 2.42)", envPrometheusBin)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	version := strings.SplitN(string(out), "\n", 2)[0]
	t.Logf("Prometheus under test: %s", version)
	v3 := strings.Contains(version, "version 3.")
	runs := os.Getenv(envRuns)
	if runs == "" {
		runs = defaultRuns
	}
	for _, run := range strings.Split(runs, ",") {
		field, mode, _ := strings.Cut(strings.TrimSpace(run), "/")
		d, err := time.ParseDuration(field)
		if err != nil || (mode != "native" && mode != "classic") {
			t.Fatalf("%s: %q is not <scrape interval>/<native|classic>", envRuns, run)
		}
		t.Run(fmt.Sprintf("scrape %s %s", field, mode), func(t *testing.T) {
			scrape := time.Duration(float64(d) * timeScale).Round(time.Millisecond)
			m := e2eMonitor{scrape: scrape, amURL: startAlertmanager(t)}
			var flags []string
			if mode == "native" {
				m.nativeHistograms = true
				if v3 {
					// Stable in 3.x: a scrape setting. The rules and boards read
					// classic buckets: keep them beside the native ones.
					m.global = ", scrape_native_histograms: true, always_scrape_classic_histograms: true"
				} else {
					flags = append(flags, "--enable-feature=native-histograms")
					m.global = ", scrape_classic_histograms: true"
				}
			}
			m.load = func(t *testing.T, cfg string) string { return startPrometheus(t, bin, cfg, flags...) }
			t.Logf("field scrape interval %s: Prometheus scrapes and evaluates every %s (rules scaled by %g), native histograms: %v", field, scrape, timeScale, m.nativeHistograms)
			runAlertsEndToEnd(t, m)
		})
	}
}

// startPrometheus starts bin with cfg on a free port and returns its URL.
func startPrometheus(t *testing.T, bin, cfg string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	args := append([]string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr}, flags...)
	u := "http://" + addr
	startProc(t, "prometheus", filepath.Join(dir, "prometheus.log"), u+"/-/ready", bin, args...)
	return u
}

// startAlertmanager starts the Alertmanager of test/stack/alertmanager.sh
// (same binary and route) on a free port and returns its URL.
func startAlertmanager(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "alertmanager.yml")
	cfg := `route:
  receiver: blackhole
  group_by: [alertname, target, op]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: blackhole
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	u := "http://" + addr
	startProc(t, "alertmanager", filepath.Join(dir, "alertmanager.log"), u+"/-/ready", alertmanagerBin,
		"--config.file="+cfgPath, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=")
	return u
}

// startProc starts a server, waits until readyURL answers 200 and stops it
// (SIGTERM, then SIGKILL after 20s) when the test ends; its log is printed
// when it fails to start.
func startProc(t *testing.T, name, logPath, readyURL, bin string, args ...string) {
	t.Helper()
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Logf("%s (pid %d) still running 20s after SIGTERM: killing it", name, cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-done
		}
	})
	waitFor(t, 60*time.Second, name+" ready at "+readyURL, func() (bool, string) {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited before it was ready; log:\n%s", name, tail(string(b), 4000))
		default:
		}
		resp, err := http.Get(readyURL)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}
