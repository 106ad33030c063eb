package opensearch

import (
	"strings"
	"testing"
	"time"
)

// TestLedgerAgesBoundedByRetention: an age past retention is rejected with a
// message naming it; the defaults (1m, 10m, 1h) fit the default retention.
func TestLedgerAgesBoundedByRetention(t *testing.T) {
	c := DefaultConfig
	c.Addresses = []string{"http://127.0.0.1:9200"}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	c.Ledger.Ages = []time.Duration{time.Minute, 72 * time.Hour}
	want := "ledger.ages[1]: 72h is impossible: a daily canary index is deleted retention (48h) after its day ended"
	errs := c.Validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
		t.Fatalf("errors %v, want one containing %q", errs, want)
	}
}
