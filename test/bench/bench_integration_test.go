//go:build integration

// Package bench runs `dbcanary bench` (every profile, briefly) and
// `dbcanary calibrate` → `dbcanary generate` against the real local servers,
// and renders the HTML report in headless Chromium. The side-by-side peer
// scripts beside this file (peers-*.sh) compare with the reference tools.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	bench "github.com/dbcanary/dbcanary/internal/bench"
	"github.com/dbcanary/dbcanary/test/stack"
)

var (
	envs        = map[string]stack.Env{}
	chromiumBin string // test/tools/chromium.sh
	bin         string // the dbcanary binary under test
	artefacts   string // reports and screenshots
)

func TestMain(m *testing.M) {
	for _, s := range []string{"rabbitmq", "minio", "cassandra", "opensearch"} {
		envs[s] = stack.Must(s)
	}
	chromiumBin = stack.MustTool("chromium")
	var remove func()
	bin, remove = stack.MustBuild("dbcanary-bench-bin-", "-trimpath", "-ldflags", "-X github.com/prometheus/common/version.Version=bench-test")
	artefacts = stack.MustArtefactDir("bench")
	fmt.Fprintf(os.Stderr, "bench: reports and screenshots go to %s\n", artefacts)
	stack.Exit(m.Run(), remove)
}

// stackConfig is one target per local server.
func stackConfig(t *testing.T) string {
	t.Helper()
	e := func(s, k string) string { return envs[s].Get(t, k) }
	cfg := fmt.Sprintf(`global: {instance_id: bench-it}
targets:
  - name: mq
    backend: rabbitmq
    rabbitmq: {url: %q, username: %q, password_file: %q}
  - name: cass
    backend: cassandra
    cassandra:
      hosts: ["%s:%s"]
      username: %q
      password_file: %q
      local_dc: %q
      replication: {class: SimpleStrategy, replication_factor: 1}
  - name: os
    backend: opensearch
    opensearch: {addresses: [%q], replicas: 0}
  - name: s3
    backend: s3
    s3: {endpoint: "http://%s", region: %q, access_key_id_file: %q, secret_access_key_file: %q}
`, e("rabbitmq", "DBCANARY_TEST_RABBITMQ_URL"), e("rabbitmq", "DBCANARY_TEST_RABBITMQ_USER"), e("rabbitmq", "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"),
		e("cassandra", "DBCANARY_TEST_CASSANDRA_HOST"), e("cassandra", "DBCANARY_TEST_CASSANDRA_PORT"), e("cassandra", "DBCANARY_TEST_CASSANDRA_USER"),
		e("cassandra", "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"), e("cassandra", "DBCANARY_TEST_CASSANDRA_DC"),
		e("opensearch", "DBCANARY_TEST_OPENSEARCH_URL"),
		e("minio", "DBCANARY_TEST_S3_ENDPOINT"), e("minio", "DBCANARY_TEST_S3_REGION"), e("minio", "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), e("minio", "DBCANARY_TEST_S3_SECRET_KEY_FILE"))
	p := filepath.Join(t.TempDir(), "dbcanary.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, timeout time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = stack.RepoRoot() // the default --baseline, baselines/james-reference.yaml
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("dbcanary %s: did not end within %s\n%s\n%s", strings.Join(args, " "), timeout, out.String(), errb.String())
	}
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

// TestProfiles runs every profile for a few seconds and checks its report:
// every table the reference shows, figures with references and verdicts,
// every stage measured with verified reads and no failure, the live
// progress line, and the HTML page rendered in Chromium with plots that hold data.
func TestProfiles(t *testing.T) {
	cfg := stackConfig(t)
	for _, tc := range []struct {
		profile string
		args    []string
		tables  []string // titles the text report must hold
		stages  int
		rows    []string // regexps the text must match: figures beside references
	}{
		{"rabbitmq-perftest", []string{"--duration", "2s", "--warmup", "500ms"},
			[]string{"Results (PerfTest layout): key result points", "Results (opensearch-benchmark layout)"}, 1,
			[]string{`\| Publisher throughput \(the sending rate\) +\| messages / second \| +[0-9.]+ \| +3111.00 \| +[0-9.]+x \| (within|below) +\|`,
				`\| messages consumed and verified / failed \(lost\) \| messages +\| +[1-9][0-9]* / 0 \(0\) \|`}},
		{"cassandra-mixed", []string{"--duration", "2s", "--warmup", "500ms"},
			[]string{"Results (cassandra-stress layout), latency in ms", "Results (opensearch-benchmark layout)"}, 2,
			[]string{`\| mixed +\| read +\| +[0-9.]+ \|`, `\| +99th percentile latency \| +mixed/read \| +[0-9.]+ \| +ms \| +23.039 \| +[0-9.]+x \| (within|beyond) +\|`}},
		{"ycsb-a", []string{"--duration", "2s", "--warmup", "500ms", "--param", "records=200"},
			[]string{"Results (YCSB / ApsaraDB layout), latency in µs"}, 2,
			[]string{`\| this run +\| +8/8 \| +[0-9.]+ \|`, `\| reference 80 % CPU \| 100/100 \| +32277.00 \| +3071.00 \| +29745.00 \|`, `\| verdict +\| +\| +below \|`}},
		{"opensearch-pmc", []string{"--duration", "2s", "--warmup", "500ms", "--param", "bulk-size=50"},
			[]string{"Results (opensearch-benchmark layout)"}, 4,
			[]string{`\| +Mean Throughput \| index-append \| +[0-9.]+ \| docs/s \| +763.16 \|`, `\| +99th percentile latency \| +term \| +[0-9.]+ \| +ms \| +74.79 \|`,
				`\| +50th percentile latency \| +phrase \| +[0-9.]+ \| +ms \| +23.03 \|`, `\| +Mean Throughput \| +default \| +[0-9.]+ \| +ops/s \| +19.95 \| +[0-9.]+x \| (within|below) +\|`}},
		{"s3-sizes", []string{"--duration", "1s", "--param", "worker-steps=8"},
			[]string{"Download performance with 4KiB objects", "Download performance with 128KiB objects", "Download performance with 1MiB objects", "Download performance with 8MiB objects"}, 8,
			[]string{`\| +8 \| +[0-9.]+ MB/s \| +[0-9.]+ \|`, `\| reference \| 0.2 - 0.6 MB/s \|.*\| 67 - 293 \|`, `Setup: uploaded 10 8MiB objects with 8 threads`}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			js, page := filepath.Join(artefacts, tc.profile+".json"), filepath.Join(artefacts, tc.profile+".html")
			args := append([]string{"bench", "--config.file", cfg, "--profile", tc.profile, "--json", js, "--html", page}, tc.args...)
			t0 := time.Now()
			code, out, errOut := run(t, 3*time.Minute, args...)
			t.Logf("%s: %s", tc.profile, time.Since(t0).Round(100*time.Millisecond))
			_ = os.WriteFile(filepath.Join(artefacts, tc.profile+".txt"), []byte(out), 0o644)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			progress := regexp.MustCompile(`(?m)^\[` + regexp.QuoteMeta(tc.profile) + `\] [0-9]+/[0-9]+ \S.* [0-9]+ ops/s  p50 [0-9.]+(ms|µs)  p99 [0-9.]+(ms|µs)  errors 0$`)
			if !progress.MatchString(errOut) {
				t.Errorf("no progress line on stderr:\n%s", errOut)
			}
			for _, title := range tc.tables {
				if !strings.Contains(out, "\n"+title) {
					t.Errorf("report lacks the table %q:\n%s", title, out)
				}
			}
			for _, re := range tc.rows {
				if !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("report lacks %s:\n%s", re, out)
				}
			}
			if !strings.Contains(out, "Every read was verified") {
				t.Errorf("report does not say reads were verified:\n%s", out)
			}
			data, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			var r bench.Report
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Stages) != tc.stages || r.Failed != 0 || r.Version != "bench-test" {
				t.Fatalf("JSON: %d stages (want %d), %d failed, version %q", len(r.Stages), tc.stages, r.Failed, r.Version)
			}
			for _, s := range r.Stages {
				for _, o := range s.Ops {
					if o.OK == 0 || o.Failed != 0 || len(o.Series) == 0 {
						t.Errorf("stage %s op %s: %d ok, %d failed, %d plot points", s.Name, o.Op, o.OK, o.Failed, len(o.Series))
					}
					if o.BytesReceived == 0 && (strings.HasPrefix(o.Op, "get_") || o.Op == "read" || o.Op == "consume") {
						t.Errorf("stage %s op %s read nothing back", s.Name, o.Op)
					}
				}
			}
			checkPage(t, page, tc.profile)
		})
	}
}

var plotRE = regexp.MustCompile(`<svg class="plot" data-kind="(latency|throughput)" data-points="([0-9]+)"[^>]*>(.*?)</svg>`)

// checkPage renders the report in headless Chromium: the DOM holds every
// table and a latency and a throughput plot per op with data, and the
// screenshot shows the page's own styles (the dark header bar).
func checkPage(t *testing.T, page, label string) {
	t.Helper()
	chromium := chromiumBin
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,2400", "--hide-scrollbars"}
	browse := func(extra ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, append(append(flags, extra...), "file://"+page)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, errb.String())
		}
		return out.Bytes()
	}
	dom := string(browse("--dump-dom"))
	_ = os.WriteFile(filepath.Join(artefacts, label+".dom.html"), []byte(dom), 0o644)
	plots := plotRE.FindAllStringSubmatch(dom, -1)
	kinds := map[string]int{}
	for _, p := range plots {
		n, _ := strconv.Atoi(p[2])
		if n == 0 || !strings.Contains(p[3], "<polyline") && !strings.Contains(p[3], "<circle") {
			t.Errorf("a %s plot has no data: %.300s", p[1], p[0])
		}
		kinds[p[1]]++
	}
	if kinds["latency"] == 0 || kinds["latency"] != kinds["throughput"] {
		t.Errorf("rendered plots: %v; want a latency and a throughput plot per op", kinds)
	}
	if !strings.Contains(dom, `<section class="table" id="table-`) || !strings.Contains(dom, `<td class="r ">`) {
		t.Errorf("the rendered page has no table:\n%.2000s", dom)
	}
	shot := filepath.Join(artefacts, label+".png")
	browse("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	// The header bar is #1d2b3a from the page's own stylesheet (white unstyled).
	if r, g, b, _ := img.At(6, 6).RGBA(); r>>8 > 60 || g>>8 > 70 || b>>8 < 40 || b>>8 > 90 {
		t.Errorf("screenshot %s: header pixel rgb(%d,%d,%d), want the dark header: the stylesheet did not apply", shot, r>>8, g>>8, b>>8)
	}
	t.Logf("screenshot: %s", shot)
}

// TestCalibrateGenerate: calibrate noop and RabbitMQ targets at canary rates,
// generate rules from the file, and check them with promtool: valid, their
// generated tests pass, and the RabbitMQ thresholds are the measured p99 ×
// the factors, for that target only.
func TestCalibrateGenerate(t *testing.T) {
	if out, err := exec.Command("bash", filepath.Join(stack.Dir(), "prometheus.sh"), "install").CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	e := envs["rabbitmq"]
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dbcanary.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {instance_id: calibrate-it}
targets:
  - {name: floor, backend: noop, ops: {noop: {rate: 20}}}
  - name: mq-cal
    backend: rabbitmq
    ops: {publish: {rate: 20}, consume: {}}
    rabbitmq: {url: %q, username: %q, password_file: %q}
`, e.Get(t, "DBCANARY_TEST_RABBITMQ_URL"), e.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), e.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"))), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "calibrated.yaml")
	code, out, errOut := run(t, time.Minute, "calibrate", "--config.file", cfg, "--duration", "8s", "--out", file, "--conditions", "RabbitMQ 3.10.8 (Debian), loopback")
	if code != 0 {
		t.Fatalf("calibrate: exit %d\n%s\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^calibrate [0-9.]+s / 8.0s  samples [0-9]+  failures 0$`).MatchString(errOut) {
		t.Errorf("no progress line:\n%s", errOut)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(artefacts, "calibrated.yaml"), data, 0o644)
	// The measured publish p99, in ms, as written.
	m := regexp.MustCompile(`(?s)id: mq-cal-publish-p99\n.*?value: ([0-9.]+)\n.*?use: alert`).FindStringSubmatch(string(data))
	if m == nil || !strings.Contains(string(data), "RabbitMQ 3.10.8") {
		t.Fatalf("no alerted publish p99 in the file:\n%s", data)
	}
	p99, _ := strconv.ParseFloat(m[1], 64)

	rules := filepath.Join(dir, "alerts")
	code, out, genErr := run(t, time.Minute, "generate", "rules", "--baseline", file, "--out", rules)
	if code != 0 {
		t.Fatalf("generate rules: exit %d\n%s\n%s", code, out, genErr)
	}
	if code, out, errOut := run(t, time.Minute, "generate", "dashboards", "--baseline", file, "--out", filepath.Join(dir, "dashboards")); code != 0 {
		t.Fatalf("generate dashboards: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, args := range [][]string{{"check", "rules", "dbcanary-rules.yml"}, {"test", "rules", "tests/dbcanary-rules_test.yml"}} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = rules
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gen, err := os.ReadFile(filepath.Join(rules, "dbcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// The warning is the smallest bucket bound at or above p99 x 2 (or within
	// the snap tolerance below it), on the calibrated target only.
	th := regexp.MustCompile(`quantile_rate5m\{backend="rabbitmq",op="publish",target="mq-cal",quantile="0.99"\} > ([0-9.]+) and`).FindAllStringSubmatch(string(gen), -1)
	// On a loaded machine the measured p99 can be so high that the critical
	// (x5) reaches the op's timeout (CI of 7 Dec: 661 ms, x5 snapped to 5s):
	// such a rule could never fire, and generate leaves it out and says so.
	skipped := strings.Contains(genErr, "no DbcanaryLatencyAboveBaseline rule for rabbitmq publish p99 critical (figure mq-cal-publish-p99)")
	if len(th) != 2 && !(len(th) == 1 && skipped) {
		t.Fatalf("%d publish rules for target mq-cal, want warning and critical (or the critical's skip note; stderr: %q):\n%s", len(th), genErr, gen)
	}
	if skipped {
		t.Logf("measured publish p99 %g ms: the critical threshold is at or above the op's timeout, left out as it should be", p99)
	}
	warn, _ := strconv.ParseFloat(th[0][1], 64)
	if raw := p99 * 2 / 1000; warn < raw*0.95 || warn > raw*3 {
		t.Errorf("warning threshold %gs for a measured p99 of %g ms (x2 = %gs)", warn, p99, raw)
	}
	if strings.Contains(string(gen), `op="publish",quantile="0.99"`) {
		t.Errorf("a backend-wide publish rule was generated from a file of per-target figures")
	}
}
