package s3

import (
	"testing"
	"time"
)

// TestLedgerAgesBoundedByLifecycle: an age the lifecycle rule makes
// impossible is rejected with a message naming the rule.
func TestLedgerAgesBoundedByLifecycle(t *testing.T) {
	c := DefaultConfig
	c.Endpoint = "http://127.0.0.1:9000"
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
}
