package generate

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dbcanary/dbcanary/internal/baseline"
)

var update = flag.Bool("update", false, "rewrite the committed alerts/ and dashboards/ files")

// repoRoot is two levels above this package, where `go test` runs its tests
// (also built with -trimpath, as TestAddProbe builds its copy).
func repoRoot() string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return dir
}

// installedPromtool is the promtool on PATH: Debian's, which `make deps`
// installs (test/stack/prometheus.sh).
func installedPromtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not on PATH: run `make deps` (test/stack/prometheus.sh install): %v", err)
	}
	return p
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
