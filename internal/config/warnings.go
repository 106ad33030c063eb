package config

import (
	"github.com/dbcanary/dbcanary/probes"
)

// Warnings are the target's valid settings that still make the canary check
// less than an operator may expect: the backend's own (probes.Warner) and the
// durability ledger's rates against its ages and bound. check-config prints
// them; the daemon logs them at start-up and reload.
func (t *Target) Warnings() []string {
	var out []string
	if w, ok := t.Probe.(probes.Warner); ok {
		out = append(out, w.Warnings()...)
	}
	return append(out, t.LedgerWarnings()...)
}

// LedgerWarnings are the durability ledger's part of Warnings.
func (t *Target) LedgerWarnings() []string {
	lc, ok := t.Probe.(probes.LedgerConfigured)
	if !ok {
		return nil
	}
	ages, maxEntries := lc.LedgerSettings()
	return probes.LedgerWarnings(ages, maxEntries, t.opRate(probes.OpLedgerWrite), t.opRate(probes.OpLedgerCheck))
}

// opRate is an effective op's rate, 0 when it is off.
func (t *Target) opRate(name string) float64 {
	for _, o := range t.Resolved {
		if o.Name == name {
			return o.Rate
		}
	}
	return 0
}
