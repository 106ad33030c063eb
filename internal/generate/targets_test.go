package generate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/baseline"
)

// withTargetFigure is the shipped baseline plus a figure of one target's own
// (as `dbcanary calibrate` writes), looser than the backend-wide one, so the
// backend-wide rule would fire on that target if it did not leave it out.
func withTargetFigure(t *testing.T) *baseline.File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, []byte(`  - {id: mq-a-publish-p99, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 1, unit: s, quoted: "p99 1 s", source: james-db, conditions: "measured on mq-a", use: alert, targets: [mq-a], samples: 600}
  - {id: s3-a-ttfb-p99, backend: s3, ops: [get_4KiB], kind: phase, phase: first_byte, stat: p99, value: 2, unit: ms, quoted: "p99 2 ms", source: james-db, conditions: "measured on s3.a", use: alert, targets: [s3.a]}
`)...)
	b, err := baseline.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A target's own figure gets rules selecting only that target, the
// backend-wide rules leave it out, and promtool accepts both and passes
// their generated tests (the target's scenarios run on series of that target).
func TestTargetThresholds(t *testing.T) {
	b := withTargetFigure(t)
	rf, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var own, wide, ownPhase, widePhase, series int
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Record == "target_"+RecLatencyBaseline && r.Labels["target"] == "mq-a" && r.Expr == "vector(1)":
				series++
			case r.Record == "target_"+RecPhaseBaseline && r.Labels["target"] == "s3.a":
				series++
			case r.Alert != AlertLatencyAboveBaseline:
			case strings.Contains(r.Expr, `op="publish",target="mq-a",quantile="0.99"} > `) && strings.Contains(r.Expr, `{backend="rabbitmq",op="publish",target="mq-a",le="+Inf"}`):
				own++
			case strings.Contains(r.Expr, `op="publish",target!~"mq-a",quantile="0.99"} > `):
				wide++
			case strings.Contains(r.Expr, `op="get_4KiB",target="s3.a",phase="first_byte"`):
				ownPhase++
			case strings.Contains(r.Expr, `op="get_4KiB",target!~"s3\\.a",phase="first_byte"`):
				widePhase++
			}
		}
	}
	if own != 2 || wide != 2 || ownPhase != 2 || widePhase != 2 || series != 2 {
		t.Fatalf("rules: %d own and %d backend-wide publish, %d own and %d backend-wide first_byte, %d own baseline series; want 2 2 2 2 2", own, wide, ownPhase, widePhase, series)
	}
	th, err := Thresholds(b)
	if err != nil {
		t.Fatal(err)
	}
	if table := string(ThresholdTable(b)); !strings.Contains(table, "| rabbitmq | publish (target mq-a) |") {
		t.Errorf("threshold table does not name the target:\n%s", table)
	}
	for _, x := range th {
		if x.Target == "mq-a" && x.Severity == "warning" && x.Bound != 1 {
			t.Errorf("mq-a warning bound %g, want 1", x.Bound)
		}
	}
	if _, err := Dashboards(b); err != nil {
		t.Fatal(err)
	}

	promtool := installedPromtool(t)
	files, err := RuleFiles(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// promtool runs only the scenarios of the two ops that have a target's
	// own figure (7 of 104 tests): the others are the shipped file's, which
	// TestPromtool runs, and all 104 took 107 s of make test twice (the unit
	// and the integration pass).
	files["tests/dbcanary-rules_test.yml"] = onlyTests(t, files["tests/dbcanary-rules_test.yml"], "rabbitmq publish", "s3 get_4KiB first_byte")
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "dbcanary-rules.yml"}, {"test", "rules", "tests/dbcanary-rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// onlyTests keeps the promtool tests whose name holds one of the substrings;
// it fails when none is left, so a renamed scenario cannot empty the check.
func onlyTests(t *testing.T, data []byte, names ...string) []byte {
	t.Helper()
	out, n := testsWhere(t, data, func(name string) bool {
		for _, s := range names {
			if strings.Contains(name, s) {
				return true
			}
		}
		return false
	})
	if n < len(names) {
		t.Fatalf("only %d promtool tests are named after %q", n, names)
	}
	return out
}

// testsWhere returns the promtool test file data with only the tests whose
// name keep accepts, and how many those are.
func testsWhere(t *testing.T, data []byte, keep func(name string) bool) ([]byte, int) {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	all, _ := doc["tests"].([]any)
	var kept []any
	for _, x := range all {
		if name, _ := x.(map[string]any)["name"].(string); keep(name) {
			kept = append(kept, x)
		}
	}
	doc["tests"] = kept
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out, len(kept)
}
