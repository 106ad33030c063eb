package s3

import (
	"testing"
	"time"
)

// TestLedgerAgesBoundedByLifecycle: an age the lifecycle rule or the
// collector (abandoned_after) makes impossible is rejected with a message
// naming the one that deletes the object first.
func TestLedgerAgesBoundedByLifecycle(t *testing.T) {
	c := DefaultConfig
	c.Endpoint = "http://127.0.0.1:9000"
	c.AbandonedAfter = 72 * time.Hour
	c.Ledger.Ages = []time.Duration{time.Minute, 48 * time.Hour}
	errs := c.Validate()
	want := "ledger.ages[1]: 48h is impossible: the lifecycle rule (lifecycle_expiry) deletes canary objects after 1 day, so a write acknowledged 48h ago is gone by design (set shorter ledger.ages or a longer retention)"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("errors %v\nwant %q", errs, want)
	}
	c.LifecycleExpiry = false
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("without the lifecycle rule: %v", errs)
	}
	// The collector removes ledger objects older than abandoned_after: an
	// age past it less an hour for clock skew is impossible too.
	c.AbandonedAfter = 24 * time.Hour
	c.Ledger.Ages = []time.Duration{time.Minute, 30 * time.Hour}
	errs = c.Validate()
	want = "ledger.ages[1]: 30h is impossible: the collector deletes ledger objects older than abandoned_after (24h), and an hour is kept for clock skew, so a write acknowledged 30h ago is gone by design (set shorter ledger.ages or a longer retention)"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("errors %v\nwant %q", errs, want)
	}
	c.Ledger.Ages = []time.Duration{time.Minute, 22 * time.Hour}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("22h with abandoned_after 24h: %v", errs)
	}
	if f := c.ledgerForgetAfter(); f <= 23*time.Hour || f >= 24*time.Hour {
		t.Fatalf("forget after %s: must leave the last age time to run and stay under abandoned_after", f)
	}
}

// TestParseLedgerKey: the collector recognises ledger objects, and only the
// exact layout the ledger writes.
func TestParseLedgerKey(t *testing.T) {
	for rel, want := range map[string]keyKind{
		"pod-a/ledger/0123456789abcdef":   keyLedger,
		"pod-a/ledger/0123456789abcde":    keyForeign,
		"pod-a/ledger/0123456789ABCDEF":   keyForeign,
		"pod-a/ledger/notes.txt":          keyForeign,
		"pod-a/ledgers/0123456789abcdef":  keyForeign,
		"pod-a/ledger/x/0123456789abcdef": keyForeign,
	} {
		kind, group := parseKey(rel)
		if kind != want {
			t.Errorf("%s: kind %d, want %d", rel, kind, want)
		}
		if kind == keyLedger && group != "pod-a/ledger/" {
			t.Errorf("%s: group %q", rel, group)
		}
	}
}
