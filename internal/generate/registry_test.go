package generate

import (
	"slices"
	"sort"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/all"
)

// variantOps are ops a probe runs only in a non-default configuration
// (Cassandra's ycsb_a profile), so its default Ops() does not list them.
var variantOps = map[string][]string{"cassandra": {"update"}}

// TestTableMatchesProbes: the rules and boards cover exactly the ops the
// probes run, so no alert watches an op that does not exist and no op runs
// without rules and panels.
func TestTableMatchesProbes(t *testing.T) {
	for _, b := range Backends {
		be, ok := probes.Lookup(b.Name)
		if !ok {
			t.Errorf("generator backend %q is not a registered probe", b.Name)
			continue
		}
		probeOps := map[string][]string{}
		for _, s := range be.NewConfig().Ops() {
			probeOps[s.Name] = s.Phases
		}
		for _, v := range variantOps[b.Name] {
			probeOps[v] = nil
		}
		for _, op := range b.Ops {
			phases, ok := probeOps[op.Name]
			if !ok {
				t.Errorf("%s: the generator has op %q, the probe does not", b.Name, op.Name)
				continue
			}
			for _, ph := range op.Phases {
				if !slices.Contains(phases, ph) {
					t.Errorf("%s/%s: the generator has phase %q, the probe declares %v", b.Name, op.Name, ph, phases)
				}
			}
			delete(probeOps, op.Name)
		}
		var missing []string
		for op := range probeOps {
			missing = append(missing, op)
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: ops without rules or panels: %v", b.Name, missing)
		}
	}
	for _, name := range probes.Names() {
		if _, ok := backendByName(name); !ok && name != "noop" {
			t.Errorf("registered backend %q has no rules or boards", name)
		}
	}
}
