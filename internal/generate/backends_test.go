package generate

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

func mustBackends(t testing.TB) []backend {
	t.Helper()
	bes, err := backends()
	if err != nil {
		t.Fatal(err)
	}
	return bes
}

// lastPhase is the phase an op's phase panel draws the thresholds of.
func lastPhase(t testing.TB, name, op string) string {
	t.Helper()
	be, ok := backendByName(name)
	o, found := be.Op(op)
	if !ok || !found || len(o.Phases) == 0 {
		t.Fatalf("%s has no op %s with phases", name, op)
	}
	return o.Phases[len(o.Phases)-1]
}

// TestBackendsFromRegistry: the rules and boards cover every registered
// probe that has a board, sorted by name, and nothing else.
func TestBackendsFromRegistry(t *testing.T) {
	var want []string
	for _, name := range probes.Names() {
		if be, _ := probes.Lookup(name); !be.Facts.NoBoard {
			want = append(want, name)
		}
	}
	bes := mustBackends(t)
	if len(bes) != len(want) || len(bes) == 0 {
		t.Fatalf("%d backends with a board, want %v", len(bes), want)
	}
	for i, be := range bes {
		if be.Name != want[i] {
			t.Errorf("backend %d is %s, want %s", i, be.Name, want[i])
		}
		if !KnownOp(be.Name, be.Ops[0].Name, "") {
			t.Errorf("%s: KnownOp misses op %s", be.Name, be.Ops[0].Name)
		}
	}
	if KnownOp("noop", "noop", "") {
		t.Error("noop has no board, so no op the rules know")
	}
}

// TestBackendWithoutFactsIsAnError: a backend registered without facts stops
// the generator, naming it. The registry is global: the backend is
// registered in a child process, so every other test sees the real ones.
func TestBackendWithoutFactsIsAnError(t *testing.T) {
	const env = "DBCANARY_TEST_GHOST_BACKEND"
	if os.Getenv(env) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBackendWithoutFactsIsAnError$")
		cmd.Env = append(os.Environ(), env+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	noop, _ := probes.Lookup(probes.Names()[0])
	probes.Register(probes.Backend{Name: "ghost", NewConfig: noop.NewConfig, New: noop.New})
	if _, err := Dashboards(shippedBaseline(t)); err == nil || !strings.Contains(err.Error(), `"ghost" is registered without facts`) {
		t.Errorf("a backend without facts: %v", err)
	}
}
