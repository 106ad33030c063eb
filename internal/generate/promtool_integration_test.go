//go:build integration

package generate

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPromtool runs promtool check rules and promtool test rules on the
// committed files; test/stack/prometheus.sh install provides promtool
// (Debian's 2.42). Integration-tagged: promtool test rules takes minutes on a
// loaded machine. Prometheus 3's promtool runs the same in make test-compat.
func TestPromtool(t *testing.T) {
	root := repoRoot()
	install := exec.Command("bash", filepath.Join(root, "test", "stack", "prometheus.sh"), "install")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("cannot install promtool: %v\n%s", err, out)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found after install: %v", err)
	}
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(root, "alerts", "dbcanary-rules.yml")).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules alerts/dbcanary-rules.yml: %v\n%s", err, out)
	}
	promtoolTestSplit(t, promtool, root)
	// The scaled test copy the end-to-end test loads must be valid too.
	b := shippedBaseline(t)
	files, err := RuleFiles(b, Options{TimeScale: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "scaled.yml")
	if err := os.WriteFile(p, files["dbcanary-rules.yml"], 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", p).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules (scaled): %v\n%s", err, out)
	}
	var rf RuleFile
	if err := yaml.Unmarshal(files["dbcanary-rules.yml"], &rf); err != nil || len(rf.Groups) != 4 {
		t.Errorf("scaled rules do not round-trip: %v", err)
	}
	// Rules that keep policy.aggregate_by labels are valid PromQL too.
	b.Policy.AggregateBy = []string{"cluster", "vantage"}
	files, err = RuleFiles(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p = filepath.Join(t.TempDir(), "aggregate-by.yml")
	if err := os.WriteFile(p, files["dbcanary-rules.yml"], 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", p).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules (aggregate_by cluster, vantage): %v\n%s", err, out)
	}
}

// promtoolTestSplit runs every test of the committed promtool test file, in
// two promtool processes at once: the two drift scenarios (26 h each at the
// 1-minute evaluation interval: over half of the evaluation steps) and the
// others. One process took ~70-100 s of make test's serial integration pass.
func promtoolTestSplit(t *testing.T, promtool, root string) {
	data, err := os.ReadFile(filepath.Join(root, "alerts", "tests", "dbcanary-rules_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(root, "alerts", "dbcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dbcanary-rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	drift := func(name string) bool { return strings.Contains(name, "drift") }
	parts := map[string]func(string) bool{"drift": drift, "others": func(n string) bool { return !drift(n) }}
	var wg sync.WaitGroup
	var total int
	for name, keep := range parts {
		part, n := testsWhere(t, data, keep)
		if n == 0 {
			t.Fatalf("no promtool test in part %s", name)
		}
		total += n
		file := filepath.Join("tests", name+".yml")
		if err := os.WriteFile(filepath.Join(dir, file), part, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(promtool, "test", "rules", file)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("promtool test rules (%d tests of alerts/tests/dbcanary-rules_test.yml: %s): %v\n%s", n, name, err, out)
			} else {
				t.Logf("promtool test rules (%d tests: %s): %s", n, name, strings.TrimSpace(string(out)))
			}
		}()
	}
	wg.Wait()
	if _, all := testsWhere(t, data, func(string) bool { return true }); total != all {
		t.Errorf("the parts hold %d tests, the file %d", total, all)
	}
}

// TestPromtoolAggregateBy runs rules generated with policy.aggregate_by:
// [cluster] on Prometheus's own engine (promtool test rules) with the same
// target in two clusters: a slow store and a data-integrity failure in
// cluster a page for cluster a only, with the label, while cluster b (fast,
// intact) stays silent. Without the setting the two clusters' buckets would
// be summed into one p99.
func TestPromtoolAggregateBy(t *testing.T) {
	root := repoRoot()
	install := exec.Command("bash", filepath.Join(root, "test", "stack", "prometheus.sh"), "install")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("cannot install promtool: %v\n%s", err, out)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found after install: %v", err)
	}
	b := shippedBaseline(t)
	b.Policy.AggregateBy = []string{"cluster"}
	rf, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	th, err := Thresholds(b)
	if err != nil {
		t.Fatal(err)
	}
	var w, c Threshold
	for _, x := range th {
		if x.Backend == "rabbitmq" && x.Op == "publish" && x.Target == "" {
			if x.Severity == "warning" {
				w = x
			} else {
				c = x
			}
		}
	}
	if w.Severity == "" || c.Severity == "" {
		t.Fatal("no rabbitmq publish thresholds")
	}
	e := expander{rules: rf}
	tl := map[string]string{"target": "rmq-1", "backend": "rabbitmq", "op": "publish"}
	nc := nextBound(c.Bound)
	var series []Series
	for _, cluster := range []string{"a", "b"} {
		for _, le := range append(uniq(w.Bound, nextBound(w.Bound), c.Bound, nc), math.Inf(1)) {
			vals := "0+60x20" // every sample at or below le
			if cluster == "a" && le < nc {
				vals = "0x20" // cluster a: every sample above the critical bound
			}
			series = append(series, Series{sel("dbcanary_op_latency_seconds_bucket", merge(tl, "result", "ok", "cluster", cluster, "le", leString(le))), vals})
		}
		vals := "0x20"
		if cluster == "a" {
			vals = "0x5 1x15"
		}
		series = append(series, Series{sel("dbcanary_op_failures_total", merge(tl, "cause", "mismatch", "cluster", cluster)), vals})
	}
	al := merge(tl, "quantile", qs(w.Quantile), "cluster", "a")
	v := fmt.Sprintf("%.3f", c.Bound+(nc-c.Bound)*c.Quantile)
	tests := []AlertTest{
		{EvalTime: "15m", Alertname: AlertLatencyAboveBaseline, ExpAlerts: []ExpAlert{
			e.expect(AlertLatencyAboveBaseline, merge(al, "severity", w.Severity, "figure", w.Figure.ID), v),
			e.expect(AlertLatencyAboveBaseline, merge(al, "severity", c.Severity, "figure", c.Figure.ID), v)}},
		{EvalTime: "8m", Alertname: AlertDataIntegrity, ExpAlerts: []ExpAlert{
			e.expect(AlertDataIntegrity, merge(tl, "cause", "mismatch", "cluster", "a"), "1")}},
	}
	dir := t.TempDir()
	data, err := rf.Marshal(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, g := range rf.Groups {
		groups = append(groups, g.Name)
	}
	tf := &PromTestFile{RuleFiles: []string{"rules.yml"}, EvaluationInterval: "1m", GroupEvalOrder: groups,
		Tests: []TestGroup{{Name: "two clusters, one slow and corrupting", Interval: "1m", InputSeries: series, AlertRuleTests: tests}}}
	data, err = tf.Marshal(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.yml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules (aggregate_by cluster, two clusters): %v\n%s", err, out)
	}
	// The shipped rules (no aggregate_by) sum the clusters: the same test fails.
	b.Policy.AggregateBy = nil
	plain, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if data, err = plain.Marshal(Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(promtool, "test", "rules", "test.yml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("the rules without aggregate_by pass the two-cluster test too: the test proves nothing\n%s", out)
	} else {
		t.Logf("without aggregate_by the test fails, as it should: %.300s", out)
	}
}
