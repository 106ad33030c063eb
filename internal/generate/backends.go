package generate

import (
	"fmt"
	"slices"

	"github.com/dbcanary/dbcanary/probes"
	// Every probe registers itself and describes its ops and board facts
	// (probes/<backend>/facts.go); the generator reads them from the registry.
	_ "github.com/dbcanary/dbcanary/probes/all"
)

// backend is one probe type as the rules and boards see it: its registered
// name and the facts it described (probes.Describe).
type backend struct {
	Name string
	probes.Facts
}

// backends are the registered backends that have a board, sorted by name.
// A backend registered without facts, or facts of a backend that is not
// registered, is an error: the rules and boards would silently miss it.
func backends() ([]backend, error) {
	registered := probes.Names()
	var out []backend
	for _, name := range registered {
		f, ok := probes.FactsOf(name)
		if !ok {
			return nil, fmt.Errorf("backend %q is registered without facts: describe its ops and board with probes.Describe in probes/%s/facts.go (docs/adding-a-probe.md)", name, name)
		}
		if f.NoBoard {
			continue
		}
		for _, p := range f.Panels {
			for _, q := range p.Queries {
				if q.Quantile != 0 && !slices.Contains(Quantiles, q.Quantile) {
					return nil, fmt.Errorf("backend %s, panel %q: quantile %g is not recorded (%v)", name, p.Title, q.Quantile, Quantiles)
				}
			}
		}
		out = append(out, backend{Name: name, Facts: f})
	}
	for _, name := range probes.Described() {
		if !slices.Contains(registered, name) {
			return nil, fmt.Errorf("facts describe backend %q, which is not registered (probes.Register)", name)
		}
	}
	return out, nil
}

// backendByName finds a backend that has a board.
func backendByName(name string) (backend, bool) {
	f, ok := probes.FactsOf(name)
	if _, reg := probes.Lookup(name); !ok || !reg || f.NoBoard {
		return backend{}, false
	}
	return backend{Name: name, Facts: f}, true
}

// hasOp reports whether the backend has the op (and phase, when not empty).
func (b backend) hasOp(op, phase string) bool {
	o, ok := b.Op(op)
	return ok && (phase == "" || slices.Contains(o.Phases, phase))
}
