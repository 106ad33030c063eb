package probes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func entry(key string, acked time.Time) LedgerEntry {
	return LedgerEntry{Key: key, Where: "t", Sum: LedgerSum([]byte(key)), Acked: acked, Setting: "ONE"}
}

func openIn(t *testing.T, dir, target string) *Ledger {
	t.Helper()
	return NewLedgerStore(dir).Open(LedgerOptions{Target: target, Backend: "test", Instance: "i1"})
}

func TestChecksAtEachAgeThenLeaves(t *testing.T) {
	l := openIn(t, "", "ages")
	defer l.Close()
	t0 := time.Now().Add(-90 * time.Second)
	if err := l.Add(entry("k1", t0)); err != nil {
		t.Fatal(err)
	}
	d := l.Take(t0.Add(30*time.Second), 4)
	if len(d) != 0 {
		t.Fatalf("due before 1m: %v", d)
	}
	d = l.Take(t0.Add(61*time.Second), 4)
	if len(d) != 1 || d[0].Age != time.Minute {
		t.Fatalf("due at 61s: %+v", d)
	}
	if len(l.Take(t0.Add(61*time.Second), 4)) != 0 {
		t.Fatal("a busy entry was handed out twice")
	}
	if done, err := l.Record(d[0], LedgerIntact); done || err != nil {
		t.Fatalf("record 1m: done %v err %v", done, err)
	}
	// Late (dbcanary was down past 10m and 1h): one check, at the largest age passed.
	d = l.Take(t0.Add(2*time.Hour), 4)
	if len(d) != 1 || d[0].Age != time.Hour {
		t.Fatalf("late due: %+v", d)
	}
	if done, err := l.Record(d[0], LedgerIntact); !done || err != nil {
		t.Fatalf("record 1h: done %v err %v", done, err)
	}
	if n, _ := l.Stats(time.Now()); n != 0 {
		t.Fatalf("entries after the last age: %d", n)
	}
	if got := value(t, l.store.checks.WithLabelValues("ages", "test", "1m", "intact")); got != 1 {
		t.Fatalf("1m intact = %v", got)
	}
}

func TestCheckReportsMissingAndCorrupted(t *testing.T) {
	l := openIn(t, "", "lossy")
	defer l.Close()
	old := time.Now().Add(-2 * time.Minute)
	for _, k := range []string{"gone", "bad", "good"} {
		if err := l.Add(entry(k, old)); err != nil {
			t.Fatal(err)
		}
	}
	var forgot []string
	err := l.Check(context.Background(), func(_ context.Context, d LedgerDue) (LedgerResult, error) {
		switch d.Key {
		case "gone":
			return LedgerMissing, nil
		case "bad":
			return LedgerCorrupted, nil
		}
		return LedgerIntact, nil
	}, func(_ context.Context, d LedgerDue) { forgot = append(forgot, d.Key) })
	if c := CauseOf(err); c != CauseNotFound {
		t.Fatalf("cause %q, err %v", c, err)
	}
	for _, want := range []string{"t gone acknowledged", "is missing at the 1m check", "t bad acknowledged", "differs from what was written"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(forgot) != 0 {
		t.Errorf("forgot %v before the last age", forgot)
	}
	if keys := l.Entries(); len(keys) != 1 || keys[0].Key != "good" {
		t.Fatalf("left %+v, want only good", keys)
	}
	if got := value(t, l.store.checks.WithLabelValues("lossy", "test", "1m", "missing")); got != 1 {
		t.Fatalf("missing = %v", got)
	}
}

func TestCheckReleasesOnStoreError(t *testing.T) {
	l := openIn(t, "", "down")
	defer l.Close()
	_ = l.Add(entry("k", time.Now().Add(-2*time.Minute)))
	boom := Fail(CauseRefused, errors.New("refused"))
	if err := l.Check(context.Background(), func(context.Context, LedgerDue) (LedgerResult, error) { return "", boom }, nil); err != boom {
		t.Fatalf("err %v", err)
	}
	if d := l.Take(time.Now(), 4); len(d) != 1 {
		t.Fatalf("entry not due again after a failed read: %v", d)
	}
}

func TestSurvivesRestartAndCorruptFileStartsFresh(t *testing.T) {
	dir := t.TempDir()
	l := openIn(t, dir, "persist")
	acked := time.Now().Add(-5 * time.Minute).Round(0)
	if err := l.Add(entry("k1", acked)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(matches) != 1 || !strings.HasSuffix(matches[0], LedgerFileName("i1", "persist", "test")) {
		t.Fatalf("files %v: want the ledger file alone (no temporary file left)", matches)
	}
	l = NewLedgerStore(dir).Open(LedgerOptions{Target: "persist", Backend: "test", Instance: "i1"}) // a restart
	got := l.Entries()
	if len(got) != 1 || got[0].Key != "k1" || !got[0].Acked.Equal(acked) {
		t.Fatalf("after restart: %+v", got)
	}
	l.Close()

	if err := os.WriteFile(matches[0], []byte(`{"version":1,"entries":[{"key":`), 0o600); err != nil {
		t.Fatal(err)
	}
	l = NewLedgerStore(dir).Open(LedgerOptions{Target: "persist", Backend: "test", Instance: "i1"})
	defer l.Close()
	if n, _ := l.Stats(time.Now()); n != 0 {
		t.Fatalf("a corrupt file gave %d entries, want a fresh ledger", n)
	}
}

// TestRemovesTemporaryFileOfACrash: a kill -9 during a save leaves the
// temporary file (test/upgrade met one); the next open removes it, so
// crashes do not pile files up in the state directory, and keeps the ledger.
func TestRemovesTemporaryFileOfACrash(t *testing.T) {
	dir := t.TempDir()
	l := openIn(t, dir, "crash")
	if err := l.Add(entry("k1", time.Now().Add(-time.Minute))); err != nil {
		t.Fatal(err)
	}
	l.Close()
	name := LedgerFileName("i1", "crash", "test")
	left := filepath.Join(dir, name+".tmp123456")
	other := filepath.Join(dir, LedgerFileName("i1", "other", "test")+".tmp654321") // another target's
	for _, p := range []string{left, other} {
		if err := os.WriteFile(p, []byte(`{"version":1,"entr`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l = openIn(t, dir, "crash")
	defer l.Close()
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary file a crash left is still there after the open: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another target's temporary file was touched: %v", err)
	}
	if n, _ := l.Stats(time.Now()); n != 1 {
		t.Fatalf("%d entries after the open, want the 1 saved", n)
	}
}

func TestBounded(t *testing.T) {
	l := NewLedgerStore("").Open(LedgerOptions{Target: "full", Backend: "test", Instance: "i1", MaxEntries: 3})
	defer l.Close()
	for i, k := range []string{"a", "b", "c", "d"} {
		_ = l.Add(entry(k, time.Now().Add(time.Duration(i)*time.Second)))
	}
	e := l.Entries()
	if len(e) != 3 || e[0].Key != "b" {
		t.Fatalf("entries %+v: want the 3 newest", e)
	}
}

func TestSharedByTwoProbesOfOneTarget(t *testing.T) {
	s := NewLedgerStore("")
	a := s.Open(LedgerOptions{Target: "shared", Backend: "test", Instance: "i1"})
	b := s.Open(LedgerOptions{Target: "shared", Backend: "test", Instance: "i1"})
	if a != b {
		t.Fatal("two opens of one target gave two ledgers")
	}
	_ = a.Add(entry("k", time.Now()))
	a.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	if n, err := count(reg, "dbcanary_ledger_entries"); err != nil || n != 1 {
		t.Fatalf("entries series %d, %v: the ledger must stay while one probe holds it", n, err)
	}
	b.Close()
	if n, _ := count(reg, "dbcanary_ledger_entries"); n != 0 {
		t.Fatalf("entries series %d after the last close", n)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		c    LedgerConfig
		want string
	}{
		{LedgerConfig{}, ""},
		{LedgerConfig{}, "ledger.ages: 1h is impossible: the rows' ttl is 30m, so a write acknowledged 1h ago is gone by design (set shorter ledger.ages or a longer retention)"},
		{LedgerConfig{Ages: []time.Duration{time.Second}}, "ledger.ages[0]: must be at least 10s, got 1s"},
		{LedgerConfig{Ages: []time.Duration{time.Minute, time.Minute}}, "ledger.ages: lists an age twice"},
	}
	for i, c := range cases {
		limit := time.Duration(0)
		if i == 1 {
			limit = 30 * time.Minute
		}
		errs := c.c.Validate(limit, "the rows' ttl is 30m")
		var got string
		if len(errs) > 0 {
			got = errs[0].Error()
		}
		if got != c.want {
			t.Errorf("case %d: got %q, want %q", i, got, c.want)
		}
	}
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func count(reg *prometheus.Registry, name string) (int, error) {
	mfs, err := reg.Gather()
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == name {
			n += len(mf.GetMetric())
		}
	}
	return n, err
}

// TestForget: entries acknowledged before the cut leave unchecked and
// uncounted, busy ones stay, and the file no longer names them.
func TestForget(t *testing.T) {
	dir := t.TempDir()
	l := openIn(t, dir, "forget")
	now := time.Now()
	for i, k := range []string{"old1", "old2", "new"} {
		if err := l.Add(entry(k, now.Add(time.Duration(i-2)*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	busy := l.Take(now.Add(2*time.Hour), 1) // old1, now busy
	if len(busy) != 1 || busy[0].Key != "old1" {
		t.Fatalf("take: %+v", busy)
	}
	n, err := l.Forget(now.Add(-30 * time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("forget: %d, %v; want 1 (old2; old1 is busy)", n, err)
	}
	var keys []string
	for _, e := range l.Entries() {
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, ",") != "old1,new" {
		t.Fatalf("entries after forget: %v", keys)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	again := NewLedgerStore(dir).Open(LedgerOptions{Target: "forget", Backend: "test", Instance: "i1"})
	defer again.Close()
	if n := len(again.Entries()); n != 2 {
		t.Fatalf("reloaded entries: %d, want 2", n)
	}
}

// TestCheckCounts: the figures the kill -9 proofs print come from the
// counter, by result and by age and result, for one target only.
func TestCheckCounts(t *testing.T) {
	s := NewLedgerStore("")
	s.checks.WithLabelValues("cc-a", "s3", "1m", "missing").Add(2)
	s.checks.WithLabelValues("cc-a", "s3", "10m", "missing").Add(1)
	s.checks.WithLabelValues("cc-a", "s3", "1m", "intact").Add(5)
	s.checks.WithLabelValues("cc-b", "s3", "1m", "missing").Add(7)
	got, err := s.CheckCounts("cc-a")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"missing": 3, "intact": 5, "1m/missing": 2, "10m/missing": 1, "1m/intact": 5} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
}

func TestStatusCountsChecksAndLastLoss(t *testing.T) {
	store := NewLedgerStore(t.TempDir())
	l := store.Open(LedgerOptions{Target: "st", Backend: "test", Instance: "i1", Ages: []time.Duration{10 * time.Second, time.Minute}, MaxEntries: 50})
	store.SetDir("")
	defer l.Close()
	t0 := time.Now().Add(-2 * time.Minute)
	for _, k := range []string{"a", "b", "c"} {
		if err := l.Add(entry(k, t0)); err != nil {
			t.Fatal(err)
		}
	}
	s := l.Status(time.Now())
	if s.Entries != 3 || s.OldestEntryAge < 2*time.Minute || s.MaxEntries != 50 || s.InMemory || !strings.HasSuffix(s.File, "ledger-i1-test-st.json") ||
		len(s.Checks) != 2 || s.Checks[0] != (LedgerAgeChecks{Age: "10s"}) || s.LastLoss != nil || !s.LastIntact.IsZero() || strings.Join(s.Ages, ",") != "10s,1m" {
		t.Fatalf("fresh status %+v", s)
	}
	due := l.Take(t0.Add(15*time.Second), 3) // each at 10s
	if len(due) != 3 {
		t.Fatalf("due %+v", due)
	}
	for i, r := range []LedgerResult{LedgerIntact, LedgerMissing, LedgerCorrupted} {
		if _, err := l.Record(due[i], r); err != nil {
			t.Fatal(err)
		}
	}
	s = l.Status(time.Now())
	if s.Checks[0] != (LedgerAgeChecks{Age: "10s", Intact: 1, Missing: 1, Corrupted: 1}) || s.Checks[1] != (LedgerAgeChecks{Age: "1m"}) ||
		s.Losses() != 2 || s.Intact() != 1 || s.Entries != 1 || s.LastIntact.IsZero() {
		t.Fatalf("after checks %+v", s)
	}
	if ll := s.LastLoss; ll == nil || ll.Key != "c" || ll.Result != LedgerCorrupted || ll.Age != "10s" || ll.Where != "t" || ll.Setting != "ONE" || !ll.Acked.Equal(t0) {
		t.Fatalf("last loss %+v", s.LastLoss)
	}
	st, ok := store.Statuses(time.Now())[[2]string{"st", "test"}]
	if !ok || st.Losses() != 2 {
		t.Fatalf("Statuses: %v %+v", ok, st)
	}
	mem := store.Open(LedgerOptions{Target: "st-mem", Backend: "test", Instance: "i1"})
	if s := mem.Status(time.Now()); !s.InMemory || s.File != "" || s.Entries != 0 || s.OldestEntryAge != 0 {
		t.Fatalf("in-memory status %+v", s)
	}
	mem.Close()
	if _, ok := store.Statuses(time.Now())[[2]string{"st-mem", "test"}]; ok {
		t.Error("a closed ledger is still listed")
	}
}

func TestRateWarnings(t *testing.T) {
	if w := LedgerWarnings(DefaultLedgerAges, 0, DefaultLedgerWriteRate, DefaultLedgerCheckRate); len(w) != 0 {
		t.Errorf("default rates warned: %v", w)
	}
	if w := LedgerWarnings(DefaultLedgerAges, 0, 0, DefaultLedgerCheckRate); len(w) != 0 {
		t.Errorf("ledger_write off warned: %v", w)
	}
	if w := LedgerWarnings([]time.Duration{10 * time.Minute}, 100, 0.5, 1); len(w) != 1 || !strings.Contains(w[0], "about 300 entries until their last check at 10m, more than ledger.max_entries (100)") {
		t.Errorf("overflow: %v", w)
	}
	if w := LedgerWarnings(DefaultLedgerAges, 0, 0.05, 0); len(w) != 1 || !strings.Contains(w[0], "ledger_check is off") {
		t.Errorf("check off: %v", w)
	}
}

// ledgerConfig is a backend section that keeps a ledger.
type ledgerConfig struct{ testConfig }

func (ledgerConfig) LedgerSettings() ([]time.Duration, int) { return []time.Duration{time.Minute}, 7 }

// TestOpenFor: a target whose section keeps a ledger gets one with the ages
// and bound of its section, and the store exports its series until the
// ledger is closed; a section that keeps none gets none.
func TestOpenFor(t *testing.T) {
	s := NewLedgerStore("")
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	l := s.OpenFor(ledgerConfig{}, LedgerOptions{Target: "att", Backend: "test", Instance: "i1"})
	if l == nil {
		t.Fatal("no ledger for a section that keeps one")
	}
	if st := l.Status(time.Now()); st.MaxEntries != 7 || strings.Join(st.Ages, ",") != "1m" {
		t.Fatalf("ledger settings %+v, want the config's", st)
	}
	if n, err := count(reg, "dbcanary_ledger_entries"); err != nil || n != 1 {
		t.Fatalf("entries series %d, %v", n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := count(reg, "dbcanary_ledger_entries"); n != 0 {
		t.Fatalf("entries series %d after close", n)
	}
	if s.OpenFor(testConfig{}, LedgerOptions{Target: "x"}) != nil {
		t.Error("a ledger for a section that keeps none")
	}
}

// TestSaveFailureIsExported: a ledger that cannot write its file (a full or
// broken state directory) keeps checking in memory, and says so in
// dbcanary_ledger_last_save_successful (0), back to 1 at its next good save;
// an in-memory ledger has no such series.
func TestSaveFailureIsExported(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewLedgerStore(dir)
	l := s.Open(LedgerOptions{Target: "sv", Backend: "test", Instance: "i1"})
	mem := NewLedgerStore("")
	mem.Open(LedgerOptions{Target: "mem", Backend: "test", Instance: "i1"})
	saved := func(st *LedgerStore) []float64 {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(st)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for _, mf := range mfs {
			if mf.GetName() == "dbcanary_ledger_last_save_successful" {
				for _, m := range mf.GetMetric() {
					out = append(out, m.GetGauge().GetValue())
				}
			}
		}
		return out
	}
	now := time.Now()
	if err := l.Add(entry("a", now)); err != nil {
		t.Fatal(err)
	}
	if got := saved(s); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after a good save: %v, want [1]", got)
	}
	// The directory is gone and a file stands in its place: no write can succeed.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(entry("b", now)); err == nil {
		t.Fatal("Add saved into a file that is not a directory")
	}
	if got := saved(s); len(got) != 1 || got[0] != 0 {
		t.Fatalf("after a failed save: %v, want [0]", got)
	}
	if n := len(l.Entries()); n != 2 {
		t.Fatalf("the ledger holds %d entries after a failed save, want 2 (still checked in memory)", n)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(entry("c", now)); err != nil {
		t.Fatal(err)
	}
	if got := saved(s); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after the directory is back: %v, want [1]", got)
	}
	if got := saved(mem); len(got) != 0 {
		t.Errorf("an in-memory ledger exports %v, want no series", got)
	}
}
