package cassandra

import (
	"fmt"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// TestLedgerAgesBoundedByTTL: without ledger.ages the defaults are cut to
// what the ttl allows; a configured age past the ttl (less a tenth) is
// rejected naming the ttl.
func TestLedgerAgesBoundedByTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{
		{time.Hour, "[1m0s 10m0s 54m0s]"},
		{2 * time.Hour, "[1m0s 10m0s 1h0m0s]"},
		{12 * time.Minute, "[1m0s 10m0s]"},
		{15 * time.Minute, "[1m0s 10m0s 13m0s]"},
		{time.Minute, "[54s]"},
	} {
		c := validConfig()
		c.TTL = tc.ttl
		if got := fmt.Sprint(c.ledgerAges()); got != tc.want {
			t.Errorf("ttl %s: default ledger ages %s, want %s", tc.ttl, got, tc.want)
		}
		if errs := c.Validate(); len(errs) != 0 {
			t.Errorf("ttl %s: %v", tc.ttl, errs)
		}
	}
	c := validConfig()
	c.Ledger.Ages = []time.Duration{time.Minute, time.Hour}
	want := "ledger.ages[1]: 1h is impossible: the table TTL (ttl: 1h) expires canary rows, and the ledger reads a row back only until 54m"
	errs := c.Validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
		t.Fatalf("errors %v, want one containing %q", errs, want)
	}
	c.Ledger.Ages = []time.Duration{time.Minute, 54 * time.Minute}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("54m with a 1h ttl: %v", errs)
	}
	if c.ledgerForgetAfter() <= 54*time.Minute || c.ledgerForgetAfter() >= time.Hour {
		t.Fatalf("forget after %s: must leave the last age time to run and stay under the ttl", c.ledgerForgetAfter())
	}
}

// TestLedgerLevels: the ledger writes and reads at the profile's levels
// unless consistency.ledger_write / ledger_check say otherwise.
func TestLedgerLevels(t *testing.T) {
	c := validConfig()
	c.Consistency = map[string]string{"insert": "ONE", "read": "TWO"}
	if w, r := c.ledgerLevels(); w != gocql.One || r != gocql.Two {
		t.Errorf("levels %v/%v, want ONE/TWO", w, r)
	}
	c.Consistency = map[string]string{"ledger_write": "ALL", "ledger_check": "ONE"}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	if w, r := c.ledgerLevels(); w != gocql.All || r != gocql.One {
		t.Errorf("levels %v/%v, want ALL/ONE", w, r)
	}
}
