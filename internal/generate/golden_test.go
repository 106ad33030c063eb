package generate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/dbcanary/dbcanary/internal/baseline"
)

var update = flag.Bool("update", false, "rewrite the committed alerts/ and dashboards/ files")

// repoRoot is two levels above this package.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// installedPromtool is Debian's promtool, which `make deps` installs
// (test/stack/prometheus.sh install): a unit test never installs packages.
func installedPromtool(t testing.TB) string {
	t.Helper()
	const promtool = "/usr/bin/promtool"
	if fi, err := os.Stat(promtool); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is not installed: run `make deps` (test/stack/prometheus.sh install)", promtool)
	}
	return promtool
}

func shippedBaseline(t testing.TB) *baseline.File {
	t.Helper()
	b, err := baseline.Load(filepath.Join(repoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGeneratedFilesUpToDate regenerates the committed rules, promtool tests
// and boards from the shipped baseline and fails on any difference
// (go test ./internal/generate -run TestGeneratedFilesUpToDate -update rewrites them).
func TestGeneratedFilesUpToDate(t *testing.T) {
	b := shippedBaseline(t)
	rules, err := RuleFiles(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	boards, err := DashboardFiles(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for dir, files := range map[string]map[string][]byte{"alerts": rules, "dashboards": boards} {
		for name, want := range files {
			p := filepath.Join(repoRoot(), dir, name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("%s/%s: %v (run: go run ./cmd/dbcanary generate rules && go run ./cmd/dbcanary generate dashboards)", dir, name, err)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s is out of date: regenerate it (go run ./cmd/dbcanary generate rules|dashboards)", dir, name)
			}
		}
	}
}
