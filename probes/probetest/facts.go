// Package probetest holds what the probes' tests share: checks on a backend's
// record that the daemon never runs.
package probetest

import (
	"fmt"
	"slices"
	"sort"

	"github.com/dbcanary/dbcanary/probes"
)

// CheckFacts returns every difference between a backend's facts and the ops
// its configurations run (Config.Ops()): pass one configuration per profile
// or variant, so that together they run every op. Each op must be in both,
// and each phase of the facts must be one the op records. A probe's
// register_test.go calls it; it lives here so that it is not linked into the binary.
func CheckFacts(f probes.Facts, configs ...probes.Config) []error {
	if f.NoBoard {
		return nil
	}
	run := map[string][]string{}
	for _, c := range configs {
		for _, s := range c.Ops() {
			run[s.Name] = s.Phases
		}
	}
	var errs []error
	for _, o := range f.Ops {
		phases, ok := run[o.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("facts list op %q, which no configuration runs", o.Name))
			continue
		}
		for _, p := range o.Phases {
			if !slices.Contains(phases, p) {
				errs = append(errs, fmt.Errorf("facts list phase %q of op %q, which records %v", p, o.Name, phases))
			}
		}
		delete(run, o.Name)
	}
	missing := make([]string, 0, len(run))
	for op := range run {
		missing = append(missing, op)
	}
	sort.Strings(missing)
	for _, op := range missing {
		errs = append(errs, fmt.Errorf("op %q runs but is not in the facts: it would have no rules or panels", op))
	}
	return errs
}
