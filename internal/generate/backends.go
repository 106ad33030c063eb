package generate

import (
	"fmt"
	"slices"

	"github.com/dbcanary/dbcanary/probes"
	// Every probe registers its one record, with its ops and board facts
	// (probes/<backend>/register.go); the generator reads them from the registry.
	_ "github.com/dbcanary/dbcanary/probes/all"
)

// backend is one probe type as the rules and boards see it: its registered
// name and the facts of its record (probes.Backend.Facts).
type backend struct {
	Name string
	probes.Facts
}

// backends are the registered backends that have a board, sorted by name.
// A backend registered without facts is an error: the rules and boards
// would silently miss it.
func backends() ([]backend, error) {
	var out []backend
	for _, name := range probes.Names() {
		be, _ := probes.Lookup(name)
		f := be.Facts
		if !f.Declared() {
			return nil, fmt.Errorf("backend %q is registered without facts: declare its ops and board in the Facts of its probes.Register (probes/%s/register.go, docs/adding-a-probe.md)", name, name)
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
	return out, nil
}

// backendByName finds a backend that has a board.
func backendByName(name string) (backend, bool) {
	be, ok := probes.Lookup(name)
	if !ok || !be.Facts.Declared() || be.Facts.NoBoard {
		return backend{}, false
	}
	return backend{Name: name, Facts: be.Facts}, true
}

// hasOp reports whether the backend has the op (and phase, when not empty).
func (b backend) hasOp(op, phase string) bool {
	o, ok := b.Op(op)
	return ok && (phase == "" || slices.Contains(o.Phases, phase))
}
