package probes

import (
	"fmt"
	"slices"
	"time"
)

// LedgerConfig is the `ledger:` block of a backend section.
type LedgerConfig struct {
	// Ages are the ages at which each acknowledged write is read back,
	// default 1m, 10m, 1h. The backend's retention bounds the last one.
	Ages []time.Duration `yaml:"ages"`
	// MaxEntries bounds the ledger (default 1000).
	MaxEntries int `yaml:"max_entries"`
}

// minLedgerAge keeps checks apart from the write path's own read-back.
const minLedgerAge = 10 * time.Second

// Validate checks the block. limit is the longest age the backend's own
// retention allows (0: no limit) and why names that retention in the error.
func (c LedgerConfig) Validate(limit time.Duration, why string) []error {
	var errs []error
	for i, a := range c.EffectiveAges() {
		f := fmt.Sprintf("ledger.ages[%d]", i)
		if len(c.Ages) == 0 {
			f = "ledger.ages"
		}
		switch {
		case a < minLedgerAge:
			errs = append(errs, Invalid(f, "must be at least %s, got %s", minLedgerAge, a))
		case limit > 0 && a >= limit:
			errs = append(errs, Invalid(f, "%s is impossible: %s, so a write acknowledged %s ago is gone by design (set shorter ledger.ages or a longer retention)", AgeLabel(a), why, AgeLabel(a)))
		}
	}
	sorted := slices.Clone(c.Ages)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(c.Ages) {
		errs = append(errs, Invalid("ledger.ages", "lists an age twice"))
	}
	if len(c.Ages) > 8 {
		errs = append(errs, Invalid("ledger.ages", "at most 8 ages, got %d", len(c.Ages)))
	}
	if c.MaxEntries < 0 || c.MaxEntries > 100000 {
		errs = append(errs, Invalid("ledger.max_entries", "must be between 1 and 100000 (0 = default %d), got %d", DefaultLedgerMaxEntries, c.MaxEntries))
	}
	return errs
}

// EffectiveAges are the configured ages, or the defaults.
func (c LedgerConfig) EffectiveAges() []time.Duration {
	if len(c.Ages) == 0 {
		return slices.Clone(DefaultLedgerAges)
	}
	return slices.Clone(c.Ages)
}

// Op names every probe uses for its ledger.
const (
	OpLedgerWrite = "ledger_write"
	OpLedgerCheck = "ledger_check"
)

// Default rates: one acknowledged write every 20 s; a check every 10 s,
// each reading back up to LedgerCheckBatch due entries (3 ages x 0.05/s due).
const (
	DefaultLedgerWriteRate = 0.05
	DefaultLedgerCheckRate = 0.1
	LedgerCheckBatch       = 4
)

// LedgerSpecs are the two ops' specs for a probe's Ops().
func LedgerSpecs() []OpSpec {
	return []OpSpec{
		{Name: OpLedgerWrite, DefaultRate: DefaultLedgerWriteRate, Help: "durability ledger: write one record the store must acknowledge, and remember it"},
		{Name: OpLedgerCheck, DefaultRate: DefaultLedgerCheckRate, Help: "durability ledger: read back acknowledged writes that reached a check age (1m, 10m, 1h): intact, missing or corrupted"},
	}
}

// LedgerConfigured is implemented by the Config of a backend whose probe
// keeps a durability ledger: the ages its `ledger:` block checks at and its
// bound, defaults and the backend's retention applied.
type LedgerConfigured interface {
	LedgerSettings() (ages []time.Duration, maxEntries int)
}

// OpenFor opens the durability ledger of a target whose backend section c
// keeps one (LedgerConfigured), with c's ages and bound; the engine hands it
// to the probe in Target.Ledger. It returns nil, and opens nothing, when c
// keeps none. o names the target; its Ages and MaxEntries come from c.
func (s *LedgerStore) OpenFor(c Config, o LedgerOptions) *Ledger {
	lc, ok := c.(LedgerConfigured)
	if !ok {
		return nil
	}
	o.Ages, o.MaxEntries = lc.LedgerSettings()
	return s.Open(o)
}

// LedgerWarnings says when valid rates make the ledger check less than it seems:
// more entries fall due than ledger_check reads, or more are held at the last
// age than max_entries keeps (the oldest are then dropped unchecked). A rate
// of 0 means the op is off.
func LedgerWarnings(ages []time.Duration, maxEntries int, writeRate, checkRate float64) []string {
	if writeRate <= 0 || len(ages) == 0 {
		return nil
	}
	if maxEntries <= 0 {
		maxEntries = DefaultLedgerMaxEntries
	}
	var out []string
	last := slices.Max(ages)
	if held := writeRate * last.Seconds(); held > float64(maxEntries) {
		out = append(out, fmt.Sprintf("durability ledger: %s at %g/s holds about %.0f entries until their last check at %s, more than ledger.max_entries (%d): the oldest are dropped unchecked (raise ledger.max_entries or lower the %s rate)",
			OpLedgerWrite, writeRate, held, AgeLabel(last), maxEntries, OpLedgerWrite))
	}
	if checkRate <= 0 {
		out = append(out, fmt.Sprintf("durability ledger: %s is on and %s is off: acknowledged writes are recorded and never read back", OpLedgerWrite, OpLedgerCheck))
	} else if due := writeRate * float64(len(ages)); due > checkRate*LedgerCheckBatch {
		out = append(out, fmt.Sprintf("durability ledger: %g checks/s fall due (%s at %g/s x %d ages), more than %s at %g/s reads (%d per run): checks come late and the ledger fills up (raise the %s rate)",
			due, OpLedgerWrite, writeRate, len(ages), OpLedgerCheck, checkRate, LedgerCheckBatch, OpLedgerCheck))
	}
	return out
}
