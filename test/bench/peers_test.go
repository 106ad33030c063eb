//go:build linux && !integration

package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeerScripts: every script of test/bench parses, and the helpers the
// peer scripts print their verdict with compute it: ratio, and medians over
// the rounds (a round missing a figure is left out, not counted as 0), and
// how busy the server was.
func TestPeerScripts(t *testing.T) {
	scripts, err := filepath.Glob("*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", s, err, out)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", `source ./peers-lib.sh
echo "ratio $(ratio 3 2) $(ratio 1 0)"
hz=$(getconf CLK_TCK); echo "busy $(busy_pct $((hz / 2)) 10.0 11.0) $(busy_pct 1 5 5) cpu $(cpu_s $((hz * 3)))"
printf '1.0 0.5 2\n1.2 0.7 -\n0.9 0.6 1.5\n1.1 0.4 1.0\n' | medians warp "above 1: faster" throughput p50 p99
printf '1 -\n' | medians warp "x" a b`)
	cmd.Env = append(os.Environ(), "PEERS="+dir, "BENCH_OUT="+filepath.Join(dir, "out"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"ratio 1.50 -",
		"busy 50 - cpu 3.0",
		"median of 3 rounds, dbcanary / warp: throughput 1.00x, p50 0.50x, p99 1.50x (above 1: faster)",
		"every round (throughput p50 p99): 1.00x 0.50x 2.00x; 0.90x 0.60x 1.50x; 1.10x 0.40x 1.00x",
		"no round gave every figure",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}
