package probes

import (
	"maps"
	"slices"
	"time"
)

// LedgerStatus is what the status page shows of one target's ledger: what it
// holds, where it is kept, and what its checks found since this process
// opened it.
type LedgerStatus struct {
	// Ages are the check ages, as the metric's age label ("1m", "10m", "1h").
	Ages []string `json:"ages"`
	// Entries is how many acknowledged writes are held, still to be read back.
	Entries int `json:"entries"`
	// OldestEntryAgeSeconds is the age of the oldest one (0 when empty).
	OldestEntryAgeSeconds float64       `json:"oldest_entry_age_seconds"`
	OldestEntryAge        time.Duration `json:"-"`
	// MaxEntries is the ledger's bound.
	MaxEntries int `json:"max_entries"`
	// File is the ledger's file under global.state_dir; empty when the
	// ledger lives in memory (InMemory), which a restart forgets.
	File     string `json:"file,omitempty"`
	InMemory bool   `json:"in_memory"`
	// Checks counts this process's checks by age, in age order.
	Checks []LedgerAgeChecks `json:"checks"`
	// LastIntact is when a check last read an entry back intact.
	LastIntact time.Time `json:"last_intact,omitzero"`
	// LastLoss is the newest entry found missing or corrupted, if any.
	LastLoss *LedgerLoss `json:"last_loss,omitempty"`
}

// LedgerAgeChecks counts the checks at one age by result.
type LedgerAgeChecks struct {
	Age       string `json:"age"`
	Intact    uint64 `json:"intact"`
	Missing   uint64 `json:"missing"`
	Corrupted uint64 `json:"corrupted"`
}

// LedgerLoss is an acknowledged write a check found missing or corrupted. Its
// fields are names the canary made (key, namespace), never data or secrets.
type LedgerLoss struct {
	At      time.Time    `json:"at"`
	Age     string       `json:"age"`
	Result  LedgerResult `json:"result"`
	Key     string       `json:"key"`
	Where   string       `json:"where,omitempty"`
	Setting string       `json:"setting,omitempty"`
	Acked   time.Time    `json:"acked"`
}

// Losses is the number of checks that found an entry missing or corrupted.
func (s *LedgerStatus) Losses() uint64 {
	var n uint64
	for _, c := range s.Checks {
		n += c.Missing + c.Corrupted
	}
	return n
}

// Intact is the number of checks that read an entry back intact.
func (s *LedgerStatus) Intact() uint64 {
	var n uint64
	for _, c := range s.Checks {
		n += c.Intact
	}
	return n
}

// ledgerTally is a ledger's own count of its checks, for Status (the metric's
// counters are write-only). Guarded by the ledger's mutex.
type ledgerTally struct {
	byAge      map[time.Duration][3]uint64 // by result, in the order of Results
	lastIntact time.Time
	lastLoss   *LedgerLoss
}

func (t *ledgerTally) add(now time.Time, d LedgerDue, r LedgerResult) {
	if t.byAge == nil {
		t.byAge = map[time.Duration][3]uint64{}
	}
	c := t.byAge[d.Age]
	c[slices.Index(LedgerResults, r)]++
	t.byAge[d.Age] = c
	if r == LedgerIntact {
		t.lastIntact = now
	} else {
		t.lastLoss = &LedgerLoss{At: now, Age: AgeLabel(d.Age), Result: r, Key: d.Key, Where: d.Where, Setting: d.Setting, Acked: d.Acked}
	}
}

// ledgerView is a ledger's state as readers see it (Status, Stats, the metrics).
type ledgerView struct {
	entries, max int
	oldest       time.Time
	path         string
	ages         []time.Duration
	checks       map[time.Duration][3]uint64
	lastIntact   time.Time
	lastLoss     *LedgerLoss
}

// publish copies the state for readers. Called with l.mu held after every change.
func (l *Ledger) publish() {
	v := &ledgerView{entries: len(l.entries), max: l.max, path: l.path, ages: slices.Clone(l.ages),
		checks: maps.Clone(l.tally.byAge), lastIntact: l.tally.lastIntact}
	for _, e := range l.entries {
		if v.oldest.IsZero() || e.Acked.Before(v.oldest) {
			v.oldest = e.Acked
		}
	}
	if l.tally.lastLoss != nil {
		loss := *l.tally.lastLoss
		v.lastLoss = &loss
	}
	l.view.Store(v)
}

// Status returns the ledger's state at now. It never waits for a check or
// a file write in progress.
func (l *Ledger) Status(now time.Time) LedgerStatus {
	v := l.view.Load()
	s := LedgerStatus{Entries: v.entries, MaxEntries: v.max, File: v.path, InMemory: v.path == "", Checks: []LedgerAgeChecks{}, LastIntact: v.lastIntact}
	if v.entries > 0 {
		s.OldestEntryAge = max(now.Sub(v.oldest), 0)
	}
	s.OldestEntryAgeSeconds = s.OldestEntryAge.Seconds()
	ages := slices.Clone(v.ages)
	for a := range v.checks {
		if !slices.Contains(ages, a) {
			ages = append(ages, a) // an age a reload removed still shows its counts
		}
	}
	slices.Sort(ages)
	for _, a := range v.ages {
		s.Ages = append(s.Ages, AgeLabel(a))
	}
	for _, a := range ages {
		c := v.checks[a]
		s.Checks = append(s.Checks, LedgerAgeChecks{Age: AgeLabel(a), Intact: c[0], Missing: c[1], Corrupted: c[2]})
	}
	if v.lastLoss != nil {
		loss := *v.lastLoss
		s.LastLoss = &loss
	}
	return s
}

// Statuses returns the state of every open ledger, keyed by target and
// backend ({target, backend}), in one pass (the status page asks once per render).
func (s *LedgerStore) Statuses(now time.Time) map[[2]string]LedgerStatus {
	ls := s.ledgers()
	out := make(map[[2]string]LedgerStatus, len(ls))
	for _, l := range ls {
		k := [2]string{l.target, l.backend}
		if _, ok := out[k]; ok {
			continue // two ledgers of one target (a state_dir change on reload): one shown, as in the metrics
		}
		out[k] = l.Status(now)
	}
	return out
}
