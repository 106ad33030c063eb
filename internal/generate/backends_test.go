package generate

import (
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
