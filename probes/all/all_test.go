package all

import (
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/probetest"
)

// TestEveryBackendDescribed: every backend linked into the daemon declares
// its rule and board facts in its one record (probes/<backend>/register.go),
// and they cover every op of the backend's default configuration.
func TestEveryBackendDescribed(t *testing.T) {
	for _, name := range probes.Names() {
		be, _ := probes.Lookup(name)
		if !be.Facts.Declared() {
			t.Errorf("%s: registered without facts", name)
		}
		for _, err := range probetest.CheckFacts(be.Facts, be.NewConfig()) {
			// Ops of other profiles are checked by the probe's own register_test.go.
			if !strings.Contains(err.Error(), "which no configuration runs") {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// TestEveryBackendNamesItsEndpoints: every backend says where its target is
// (probes.Endpointer; none for a probe that connects nowhere, like noop), so
// `dbcanary bench` can refuse a target off loopback without knowing the
// backend; it refuses a section that does not say.
func TestEveryBackendNamesItsEndpoints(t *testing.T) {
	for _, name := range probes.Names() {
		be, _ := probes.Lookup(name)
		if _, ok := be.NewConfig().(probes.Endpointer); !ok {
			t.Errorf("%s: does not implement probes.Endpointer", name)
		}
	}
}

// TestBenchProfiles: every bench profile is complete and its name unique.
func TestBenchProfiles(t *testing.T) {
	seen := map[string]string{}
	for _, name := range probes.Names() {
		be, _ := probes.Lookup(name)
		for _, p := range be.Bench {
			if p.Name == "" || p.Stages == nil || p.Tables == nil {
				t.Errorf("%s: profile %q without a name, stages or tables", name, p.Name)
			}
			if other, dup := seen[p.Name]; dup {
				t.Errorf("profile %s declared by %s and %s", p.Name, other, name)
			}
			seen[p.Name] = name
		}
	}
}
