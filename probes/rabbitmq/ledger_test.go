package rabbitmq

import (
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

func TestLedgerConfig(t *testing.T) {
	t.Setenv("PW", "x")
	c := DefaultConfig
	c.URL, c.Username, c.PasswordEnv = "amqp://127.0.0.1:5672/", "u", "PW"
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	if got := c.ledgerAges(); len(got) != 1 || got[0] != 10*time.Minute {
		t.Errorf("default ages %v, want [10m]", got)
	}
	for _, tc := range []struct {
		modify func(*Config)
		want   string
	}{
		{func(c *Config) { c.Ledger.Ages = []time.Duration{time.Minute, time.Hour} }, "ledger.ages: give one age"},
		{func(c *Config) { c.Ledger.QueueType = "stream" }, `ledger.queue_type: must be classic or quorum (empty: queue_type), got "stream"`},
		{func(c *Config) { c.QueueType, c.Ledger.Transient = "quorum", true }, "ledger.transient: a quorum queue keeps every message durably"},
	} {
		c := c
		tc.modify(&c)
		var msgs []string
		for _, e := range c.Validate() {
			msgs = append(msgs, e.Error())
		}
		if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
			t.Errorf("errors %q, want %q", msgs, tc.want)
		}
	}
}

// TestBefore: queue order is the sequence within a run, the confirm time across runs.
func TestBefore(t *testing.T) {
	t0 := time.Now()
	a := probes.LedgerEntry{Key: "ab.9", Acked: t0.Add(time.Second)}
	b := probes.LedgerEntry{Key: "ab.10", Acked: t0}
	if !before(a, b) || before(b, a) {
		t.Error("within a run, seq 9 comes before seq 10 whatever the confirm times")
	}
	c := probes.LedgerEntry{Key: "cd.1", Acked: t0.Add(time.Minute)}
	if !before(a, c) || before(c, a) {
		t.Error("across runs, the earlier confirm comes first")
	}
}
