// The durability ledger: a bounded record, per target, of writes a store
// acknowledged (what was written, its checksum, when, at which consistency),
// so probes can read each one back at set ages (1m, 10m, 1h) and tell an
// operator that an acknowledged write is gone.
//
// The daemon opens one LedgerStore; the engine opens each target's ledger
// from it and hands it to the probe in Target.Ledger. A ledger lives in a small JSON file under the store's state directory,
// so it survives a restart of dbcanary; with no state directory it lives in
// memory. A missing, unreadable or corrupt file starts a fresh, empty ledger:
// an entry the canary does not know about is never checked, so a lost ledger
// can only hide losses, never invent one.

package probes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LedgerResult is what one check of an entry found.
type LedgerResult string

// The check results: a small fixed set, safe as a metric label value.
const (
	LedgerIntact    LedgerResult = "intact"    // read back byte for byte as written
	LedgerMissing   LedgerResult = "missing"   // the store says it does not have it
	LedgerCorrupted LedgerResult = "corrupted" // it is there, but differs from what was written
)

// LedgerResults lists every result (metrics pre-create a series for each).
var LedgerResults = []LedgerResult{LedgerIntact, LedgerMissing, LedgerCorrupted}

// LedgerEntry is one acknowledged write.
type LedgerEntry struct {
	// Key names the write in the store: a row key, document id, object key,
	// message sequence number.
	Key string `json:"key"`
	// Where is the namespace it was written to (table, index, bucket, queue),
	// so a check reads it where it was written even if the config changed.
	Where string `json:"where,omitempty"`
	// Sum is the hex SHA-256 of what was written (LedgerSum).
	Sum string `json:"sum"`
	// Size is the payload size in bytes.
	Size int64 `json:"size,omitempty"`
	// Acked is when the store acknowledged the write.
	Acked time.Time `json:"acked"`
	// Setting is the consistency or durability the write was acknowledged at
	// (ONE, QUORUM, quorum queue, wait_for_active_shards=1, ...).
	Setting string `json:"setting,omitempty"`
	// Checked is the largest age at which the entry was already read back intact.
	Checked time.Duration `json:"checked,omitempty"`
}

// LedgerSum is the checksum the ledger keeps of a payload.
func LedgerSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// DefaultLedgerAges are the ages at which each entry is read back.
var DefaultLedgerAges = []time.Duration{time.Minute, 10 * time.Minute, time.Hour}

// DefaultLedgerMaxEntries bounds a ledger: at one write every 20 s and a last age
// of 1 h it holds about 180 entries.
const DefaultLedgerMaxEntries = 1000

// ledgerFileVersion is bumped when the file format changes; an older or newer file
// is ignored (a fresh ledger), never misread.
const ledgerFileVersion = 1

type ledgerFile struct {
	Version  int           `json:"version"`
	Target   string        `json:"target"`
	Backend  string        `json:"backend"`
	Instance string        `json:"instance"`
	Entries  []LedgerEntry `json:"entries"`
}

// Ledger is one target's record of acknowledged writes. It is safe for
// concurrent use.
type Ledger struct {
	target, backend, instance string
	ages                      []time.Duration
	max                       int
	path                      string // "" = in memory
	logger                    *slog.Logger

	store   *LedgerStore
	mu      sync.Mutex
	entries []LedgerEntry   // oldest first
	busy    map[string]bool // keys being checked now
	refs    int             // guarded by store.mu
	warned  bool            // the full-ledger warning was logged
	// saveFailed: the last write of the file failed (read by the metric
	// without mu: a scrape never waits for a save's fsync).
	saveFailed atomic.Bool
	seq        *ledgerCounters
	tally      ledgerTally // the checks' results, for Status

	// view is what Status and Stats read: published under mu after every
	// change, read without it, so a scrape or the status page never waits
	// for a check's file write (save fsyncs under mu).
	view atomic.Pointer[ledgerView]
}

// LedgerStore is the ledgers of one process: the state directory their files go
// in, the ledger two probes of one target share (a reload builds the new
// probe before closing the old), and the ledgers' metrics (it is a
// prometheus.Collector). It is safe for concurrent use.
type LedgerStore struct {
	mu     sync.Mutex
	dir    string
	open   map[string]*Ledger // by ledgerID
	checks *prometheus.CounterVec
}

// NewLedgerStore returns a store whose ledgers keep their file under dir; "" keeps
// them in memory.
func NewLedgerStore(dir string) *LedgerStore {
	return &LedgerStore{dir: dir, open: map[string]*Ledger{}, checks: newLedgerChecks()}
}

// SetDir sets the state directory ledgers opened from now on keep their
// file in ("" = in memory). Ledgers already open keep their file.
func (s *LedgerStore) SetDir(d string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dir = d
}

// Dir returns the state directory ("" = in memory).
func (s *LedgerStore) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir
}

// ledgers returns the open ledgers.
func (s *LedgerStore) ledgers() []*Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Ledger, 0, len(s.open))
	for _, l := range s.open {
		out = append(out, l)
	}
	return out
}

var ledgerUnsafeName = regexp.MustCompile(`[^a-z0-9_.-]`)

// LedgerFileName is the ledger file of a target under the state directory.
func LedgerFileName(instance, target, backend string) string {
	return "ledger-" + ledgerUnsafeName.ReplaceAllString(instance, "_") + "-" + ledgerUnsafeName.ReplaceAllString(backend, "_") +
		"-" + ledgerUnsafeName.ReplaceAllString(target, "_") + ".json"
}

// LedgerOptions configure a ledger.
type LedgerOptions struct {
	Target, Backend, Instance string
	// Ages are the ages to check at, sorted; empty means DefaultLedgerAges.
	Ages []time.Duration
	// MaxEntries bounds the ledger; 0 means DefaultLedgerMaxEntries.
	MaxEntries int
	// Ephemeral keeps the ledger in memory whatever the state directory (one-shot runs).
	Ephemeral bool
	// Logger carries the target (the engine's runner logger does): log lines do not repeat it.
	Logger *slog.Logger
}

// Open returns the target's ledger, loading its file if there is one. Two
// probes of the same target (a reload builds the new one before closing the
// old) share one ledger; each open is closed once.
func (s *LedgerStore) Open(o LedgerOptions) *Ledger {
	ages := slices.Clone(o.Ages)
	if len(ages) == 0 {
		ages = slices.Clone(DefaultLedgerAges)
	}
	slices.Sort(ages)
	ages = slices.Compact(ages)
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultLedgerMaxEntries
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := ""
	if s.dir != "" && !o.Ephemeral {
		path = filepath.Join(s.dir, LedgerFileName(o.Instance, o.Target, o.Backend))
	}
	id := o.Backend + "\x00" + o.Target + "\x00" + o.Instance + "\x00" + path
	if l, ok := s.open[id]; ok {
		l.mu.Lock()
		l.refs++
		l.ages, l.max = ages, o.MaxEntries
		l.publish()
		l.mu.Unlock()
		return l
	}
	l := &Ledger{store: s, target: o.Target, backend: o.Backend, instance: o.Instance, ages: ages, max: o.MaxEntries,
		path: path, logger: o.Logger.With("ledger", path), busy: map[string]bool{}, refs: 1}
	l.publish() // before it is in s.open: the metrics read the view from then on
	l.seq = s.counters(l)
	if path != "" {
		l.mu.Lock()
		l.removeCrashLeftovers()
		l.load()
		l.publish()
		l.mu.Unlock()
	}
	s.open[id] = l
	return l
}

// removeCrashLeftovers deletes the temporary files of this ledger that a
// crash during a save left behind (save's names: <file>.tmp<digits>), so
// kill -9s do not pile files up in the state directory. No other file matches.
func (l *Ledger) removeCrashLeftovers() {
	dir, prefix := filepath.Dir(l.path), filepath.Base(l.path)+".tmp"
	des, err := os.ReadDir(dir)
	if err != nil {
		return // load says what is wrong with the directory
	}
	for _, de := range des {
		rest, ok := strings.CutPrefix(de.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !de.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err == nil {
			l.logger.Info("durability ledger: removed the temporary file a crash during a save left", "file", de.Name())
		}
	}
}

// load reads the file; any problem starts a fresh ledger, logged.
func (l *Ledger) load() {
	data, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		l.logger.Info("durability ledger: no file yet, starting a fresh one")
		return
	}
	if err != nil {
		l.logger.Warn("durability ledger: cannot read the file, starting a fresh one (writes acknowledged before are not checked)", "err", err)
		return
	}
	var f ledgerFile
	if err := json.Unmarshal(data, &f); err != nil {
		l.logger.Warn("durability ledger: the file is corrupt, starting a fresh one (writes acknowledged before are not checked)", "err", err)
		return
	}
	if f.Version != ledgerFileVersion || f.Target != l.target || f.Backend != l.backend || f.Instance != l.instance {
		l.logger.Warn("durability ledger: the file is of another version, target or instance, starting a fresh one",
			"file_version", f.Version, "file_target", f.Target, "file_instance", f.Instance)
		return
	}
	now := time.Now()
	last := l.ages[len(l.ages)-1]
	for _, e := range f.Entries {
		// An entry past every age was due while dbcanary was down; it is
		// checked once, late. A malformed one is dropped.
		if e.Key == "" || e.Sum == "" || e.Acked.IsZero() || e.Acked.After(now.Add(time.Hour)) {
			continue
		}
		if e.Checked >= last {
			continue
		}
		l.entries = append(l.entries, e)
	}
	slices.SortStableFunc(l.entries, func(a, b LedgerEntry) int { return a.Acked.Compare(b.Acked) })
	if len(l.entries) > l.max {
		l.entries = l.entries[len(l.entries)-l.max:]
	}
	l.logger.Info("durability ledger loaded", "entries", len(l.entries))
}

// save publishes the change to readers and writes the file atomically
// (temporary file, fsync, rename). Called with l.mu held after every change.
func (l *Ledger) save() error {
	l.publish()
	if l.path == "" {
		return nil
	}
	err := l.writeFile()
	l.saveFailed.Store(err != nil)
	return err
}

// writeFile writes the entries to the ledger's file atomically.
func (l *Ledger) writeFile() error {
	data, err := json.Marshal(ledgerFile{Version: ledgerFileVersion, Target: l.target, Backend: l.backend, Instance: l.instance, Entries: l.entries})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(l.path), filepath.Base(l.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("durability ledger: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("durability ledger: writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("durability ledger: syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("durability ledger: %w", err)
	}
	if err := os.Rename(tmp.Name(), l.path); err != nil {
		return fmt.Errorf("durability ledger: %w", err)
	}
	return nil
}

// Ages returns the ages entries are checked at.
func (l *Ledger) Ages() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ages)
}

// Add records an acknowledged write. When the ledger is full the oldest
// entry is dropped (unchecked at its later ages: never reported lost).
// The returned error means the file could not be written: the entry is
// still checked while this process runs.
func (l *Ledger) Add(e LedgerEntry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.entries) >= l.max {
		if !l.warned {
			l.warned = true
			l.logger.Warn("durability ledger is full: the oldest entries are dropped unchecked (ledger_write runs faster than ledger_check keeps up, or the ages are long)",
				"max_entries", l.max)
		}
		drop := -1
		for i, old := range l.entries {
			if !l.busy[old.Key] {
				drop = i
				break
			}
		}
		if drop < 0 {
			return errors.New("durability ledger is full and every entry is being checked")
		}
		l.entries = slices.Delete(l.entries, drop, drop+1)
	}
	l.entries = append(l.entries, e)
	return l.save()
}

// LedgerDue is an entry to read back, and the age it is checked at.
type LedgerDue struct {
	LedgerEntry
	Age time.Duration
}

// next is the age an entry is due at next, given now; ok is false when none is due yet.
// A check that comes late (dbcanary was down) counts at the largest age passed.
func (l *Ledger) next(e LedgerEntry, now time.Time) (time.Duration, bool) {
	age := now.Sub(e.Acked)
	var due time.Duration
	for _, a := range l.ages {
		if a > e.Checked && a <= age {
			due = a
		}
	}
	return due, due > 0
}

// Take returns up to n entries due for a check, oldest first, and marks them
// busy until Record or Release.
func (l *Ledger) Take(now time.Time, n int) []LedgerDue {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LedgerDue
	for _, e := range l.entries {
		if len(out) >= n {
			break
		}
		if l.busy[e.Key] {
			continue
		}
		if a, ok := l.next(e, now); ok {
			l.busy[e.Key] = true
			out = append(out, LedgerDue{LedgerEntry: e, Age: a})
		}
	}
	return out
}

// Release returns an entry whose check could not be done (the store was
// unreachable): it is checked again at the next ledger_check.
func (l *Ledger) Release(d LedgerDue) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.busy, d.Key)
}

// Record counts a check's result and updates the ledger, saving it before
// returning. An entry found missing or corrupted, or intact at the last age,
// leaves the ledger: done reports that, and the caller may then delete what
// it wrote. It must not when err is not nil: the file still names the entry,
// and after a restart it would be checked again and found missing.
func (l *Ledger) Record(d LedgerDue, r LedgerResult) (done bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.busy, d.Key)
	l.seq.count(d.Age, r)
	l.tally.add(time.Now(), d, r)
	i := slices.IndexFunc(l.entries, func(e LedgerEntry) bool { return e.Key == d.Key })
	if i < 0 {
		l.publish()       // the count changed
		return false, nil // dropped meanwhile (ledger full)
	}
	if r == LedgerIntact && d.Age < l.ages[len(l.ages)-1] {
		l.entries[i].Checked = d.Age
		return false, l.save()
	}
	l.entries = slices.Delete(l.entries, i, i+1)
	return true, l.save()
}

// Forget removes, unchecked and uncounted, the entries acknowledged before
// the given time that are not being checked, and returns how many. A probe
// calls it for writes its store has removed by design (a TTL about to expire
// them, a canary table created anew): reading them back would report a loss
// that is not one.
func (l *Ledger) Forget(before time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.entries)
	l.entries = slices.DeleteFunc(l.entries, func(e LedgerEntry) bool { return !l.busy[e.Key] && e.Acked.Before(before) })
	if n == len(l.entries) {
		return 0, nil
	}
	return n - len(l.entries), l.save()
}

// Stats returns the number of entries and the age of the oldest.
func (l *Ledger) Stats(now time.Time) (int, time.Duration) {
	v := l.view.Load()
	if v.entries == 0 {
		return 0, 0
	}
	return v.entries, now.Sub(v.oldest)
}

// Entries returns a copy of the entries, oldest first.
func (l *Ledger) Entries() []LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// Close releases the caller's reference; the last one saves the file and
// removes the ledger's series.
func (l *Ledger) Close() error {
	s := l.store
	s.mu.Lock()
	defer s.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs--; l.refs > 0 {
		return nil
	}
	for id, o := range s.open {
		if o == l {
			delete(s.open, id)
		}
	}
	s.checks.DeletePartialMatch(prometheus.Labels{"target": l.target, "backend": l.backend})
	return l.save()
}

// AgeLabel formats an age as the metric label value: 1m, 10m, 1h, 90s.
func AgeLabel(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// LedgerReadFunc reads one entry back from the store. It returns the result, or an
// error when the store could not answer (the entry is then checked again later).
type LedgerReadFunc func(ctx context.Context, d LedgerDue) (LedgerResult, error)

// Check reads back up to LedgerCheckBatch due entries with read and records each
// result. forget is called for an entry that left the ledger after an intact
// last check, to delete what was written (never after a failed save). The
// error is the first the store returned, or a data failure (not_found,
// mismatch) naming every missing or corrupted entry of this run.
func (l *Ledger) Check(ctx context.Context, read LedgerReadFunc, forget func(ctx context.Context, d LedgerDue)) error {
	var lost []string
	var cause Cause
	due := l.Take(time.Now(), LedgerCheckBatch)
	for i, d := range due {
		r, err := read(ctx, d)
		if err != nil {
			for _, rest := range due[i:] {
				l.Release(rest)
			}
			return err
		}
		done, serr := l.Record(d, r)
		if serr != nil {
			l.logger.Warn("durability ledger: cannot save the file", "err", serr)
		}
		switch r {
		case LedgerIntact:
			if done && serr == nil && forget != nil {
				forget(ctx, d)
			}
		case LedgerMissing:
			cause = CauseNotFound
			lost = append(lost, fmt.Sprintf("%s %s acknowledged %s ago (%s at %s) is missing at the %s check",
				d.Where, d.Key, time.Since(d.Acked).Round(time.Second), d.Setting, d.Acked.UTC().Format(time.RFC3339), AgeLabel(d.Age)))
		case LedgerCorrupted:
			if cause == "" {
				cause = CauseMismatch
			}
			lost = append(lost, fmt.Sprintf("%s %s acknowledged %s ago (%s at %s) differs from what was written at the %s check",
				d.Where, d.Key, time.Since(d.Acked).Round(time.Second), d.Setting, d.Acked.UTC().Format(time.RFC3339), AgeLabel(d.Age)))
		}
	}
	if len(lost) > 0 {
		return Fail(cause, fmt.Errorf("durability ledger of %s: %s", l.target, strings.Join(lost, "; ")))
	}
	return nil
}
