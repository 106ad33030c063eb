package ledger

import (
	"fmt"
	"slices"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// Config is the `ledger:` block of a backend section.
type Config struct {
	// Ages are the ages at which each acknowledged write is read back,
	// default 1m, 10m, 1h. The backend's retention bounds the last one.
	Ages []time.Duration `yaml:"ages"`
	// MaxEntries bounds the ledger (default 1000).
	MaxEntries int `yaml:"max_entries"`
}

// minAge keeps checks apart from the write path's own read-back.
const minAge = 10 * time.Second

// Validate checks the block. limit is the longest age the backend's own
// retention allows (0: no limit) and why names that retention in the error.
func (c Config) Validate(limit time.Duration, why string) []error {
	var errs []error
	for i, a := range c.EffectiveAges() {
		f := fmt.Sprintf("ledger.ages[%d]", i)
		if len(c.Ages) == 0 {
			f = "ledger.ages"
		}
		switch {
		case a < minAge:
			errs = append(errs, probes.Invalid(f, "must be at least %s, got %s", minAge, a))
		case limit > 0 && a >= limit:
			errs = append(errs, probes.Invalid(f, "%s is impossible: %s, so a write acknowledged %s ago is gone by design (set shorter ledger.ages or a longer retention)", AgeLabel(a), why, AgeLabel(a)))
		}
	}
	sorted := slices.Clone(c.Ages)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(c.Ages) {
		errs = append(errs, probes.Invalid("ledger.ages", "lists an age twice"))
	}
	if len(c.Ages) > 8 {
		errs = append(errs, probes.Invalid("ledger.ages", "at most 8 ages, got %d", len(c.Ages)))
	}
	if c.MaxEntries < 0 || c.MaxEntries > 100000 {
		errs = append(errs, probes.Invalid("ledger.max_entries", "must be between 1 and 100000 (0 = default %d), got %d", DefaultMaxEntries, c.MaxEntries))
	}
	return errs
}

// EffectiveAges are the configured ages, or the defaults.
func (c Config) EffectiveAges() []time.Duration {
	if len(c.Ages) == 0 {
		return slices.Clone(DefaultAges)
	}
	return slices.Clone(c.Ages)
}

// Op names every probe uses for its ledger.
const (
	OpWrite = "ledger_write"
	OpCheck = "ledger_check"
)

// Default rates: one acknowledged write every 20 s; a check every 10 s,
// each reading back up to CheckBatch due entries (3 ages x 0.05/s due).
const (
	DefaultWriteRate = 0.05
	DefaultCheckRate = 0.1
	CheckBatch       = 4
)

// Specs are the two ops' specs for a probe's Ops().
func Specs() []probes.OpSpec {
	return []probes.OpSpec{
		{Name: OpWrite, DefaultRate: DefaultWriteRate, Help: "durability ledger: write one record the store must acknowledge, and remember it"},
		{Name: OpCheck, DefaultRate: DefaultCheckRate, Help: "durability ledger: read back acknowledged writes that reached a check age (1m, 10m, 1h): intact, missing or corrupted"},
	}
}
