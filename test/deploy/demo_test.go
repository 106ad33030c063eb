package deploy

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestDemoListensOnLoopback: `make demo` runs the daemon bound to 127.0.0.1
// like every server of its stack (the daemon's own default, :19190, listens on
// all interfaces). Read from the recipe make would run (-n runs nothing).
func TestDemoListensOnLoopback(t *testing.T) {
	cmd := exec.Command("make", "-n", "--no-print-directory", "demo", "DEMO_BACKENDS=")
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	run := regexp.MustCompile(`exec \S*dbcanary run .*`).FindString(string(out))
	if run == "" {
		t.Fatalf("make -n demo runs no `dbcanary run`:\n%s", out)
	}
	listens := regexp.MustCompile(`--web\.listen-address[ =](\S+)`).FindAllStringSubmatch(run, -1)
	if len(listens) == 0 {
		t.Fatalf("the demo daemon takes the default listen address (all interfaces): %s", run)
	}
	for _, l := range listens {
		if !strings.HasPrefix(l[1], "127.0.0.1:") {
			t.Errorf("the demo daemon listens on %s, want 127.0.0.1:<port>: %s", l[1], run)
		}
	}
}
