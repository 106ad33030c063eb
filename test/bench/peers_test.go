//go:build linux && !integration

package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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
		wantIn(t, "the output", string(out), want)
	}
}

// TestGroupRun: group_run counts the CPU of a process that left the command's
// tree (as opensearch-benchmark's daemonized workers do), which the shell's
// own children counters never see, and passes the command's status on. Where
// no cgroup can be made (not root, no cpuacct, no cgroup v2) it says "-",
// never 0.
func TestGroupRun(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", `source ./peers-lib.sh
group_run "$1/cpu" bash -c 'setsid bash -c "i=0; while [ \$i -lt 100000 ]; do i=\$((i+1)); done" </dev/null >/dev/null 2>&1 & exit 0'
echo "status $?"
if group_run "$1/false" false; then echo "status 0"; else echo "status $?"; fi
echo "cpu $(cat "$1/cpu") hz $(getconf CLK_TCK)"`, "group_run", dir)
	cmd.Env = append(os.Environ(), "PEERS="+dir, "BENCH_OUT="+filepath.Join(dir, "out"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantIn(t, "the output", string(out), "status 0\nstatus 1\n")
	var ticks string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "cpu" {
			ticks = f[1]
		}
	}
	canGroup := unix.Access("/sys/fs/cgroup/cpuacct", unix.W_OK) == nil
	switch {
	case ticks == "-" && !canGroup:
		t.Logf("no cgroup here: group_run says - (%s)", out)
	case ticks == "" || ticks == "-" || ticks == "0":
		t.Errorf("group_run counted %q ticks for a daemonized busy loop:\n%s", ticks, out)
	}
}

func wantIn(t *testing.T, what, text, want string) {
	t.Helper()
	if !strings.Contains(text, want) {
		t.Errorf("want %q in %s:\n%s", want, what, text)
	}
}

// TestPeersAll: peers-all.sh runs every SCRIPT:SHAPE with every PIN, passes
// the shape's words and PIN/ROUNDS to the script, keeps going past a script
// that fails (and exits non-zero), and writes the summary with each run's
// command, load and median lines. Fake peer scripts stand in for the tools.
func TestPeersAll(t *testing.T) {
	dir := t.TempDir()
	fake := `#!/usr/bin/env bash
echo "args=$* pin=$PIN rounds=$ROUNDS out=${BENCH_OUT##*/}"
echo "median of 3 rounds, dbcanary / Fake: rate 1.0${PIN}x (above 1: faster)"
echo "every round (rate): 1.00x; 1.01x; 1.02x"
`
	if err := os.WriteFile(filepath.Join(dir, "peer-good.sh"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "peer-bad.sh"), []byte("#!/usr/bin/env bash\necho cannot reach the server >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command("bash", "./peers-all.sh")
	cmd.Env = append(os.Environ(), "PEER_DIR="+dir, "BENCH_OUT="+out, "RUNS=good:get,4KiB,8 bad:x good:", "PINS=0 1", "ROUNDS=2")
	got, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1 (one script failed), got %v\n%s", err, got)
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ROUNDS=2, PINS=\"0 1\"",
		"### `PIN=0 ROUNDS=2 test/bench/peer-good.sh get 4KiB 8`",
		"### `PIN=1 ROUNDS=2 test/bench/peer-good.sh`",
		"median of 3 rounds, dbcanary / Fake: rate 1.00x",
		"median of 3 rounds, dbcanary / Fake: rate 1.01x",
		"every round (rate): 1.00x; 1.01x; 1.02x",
		"**Failed** (exit 3)",
		"cannot reach the server",
	} {
		wantIn(t, "the summary", string(sum), want)
	}
	if n := strings.Count(string(sum), "### `"); n != 6 {
		t.Errorf("want 6 runs (3 shapes x 2 pins), got %d:\n%s", n, sum)
	}
	log, err := os.ReadFile(filepath.Join(out, "good-get-4KiB-8-pin1.log"))
	if err != nil {
		t.Fatal(err)
	}
	wantIn(t, "the log", string(log), "args=get 4KiB 8 pin=1 rounds=2 out=good-get-4KiB-8-pin1")
}
