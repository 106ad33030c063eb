//go:build integration

package generate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	for _, args := range [][]string{
		{"check", "rules", "alerts/dbcanary-rules.yml"},
		{"test", "rules", "alerts/tests/dbcanary-rules_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		} else {
			t.Logf("promtool %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
		}
	}
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
