//go:build integration

package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/rabbitmq"
	"github.com/dbcanary/dbcanary/test/stack"
)

// testLedgers is the store this test binary opens its probes' durability
// ledgers from, as the daemon does for its targets (enginetest.OpenLedger).
var testLedgers = probes.NewLedgerStore("")

// ledgerCounts reads the ledger's checks of one target (probes.Store.CheckCounts).
func ledgerCounts(t *testing.T, target string) map[string]float64 {
	t.Helper()
	out, err := testLedgers.CheckCounts(target)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runOp(t *testing.T, p *rabbitmq.Probe, op string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out probes.Outcome
	out.Reset(time.Now())
	return p.Run(ctx, op, &out)
}

// kill9 kills the broker's Erlang VM with SIGKILL and waits until it is gone.
func (b *privateBroker) kill9() {
	b.t.Helper()
	pid := b.pid()
	if pid == 0 {
		b.t.Fatal("no broker pid")
	}
	stack.Kill9(b.t, pid, "the private RabbitMQ broker")
}

// ledgerKill9 declares the ledger queue the ledger block describes (by a
// first confirmed message) and waits settle, confirms n more messages, kills
// the broker with SIGKILL at once, starts it again and drains the ledger
// queue: it returns the checks by result.
func ledgerKill9(t *testing.T, b *privateBroker, target, ledgerBlock string, writes int, settle time.Duration) map[string]float64 {
	t.Helper()
	cfg := enginetest.Parse(t, brokerConfig(b.env, target, "it-ledger", "      ledger: "+ledgerBlock))
	pt := probes.Target{Name: target, InstanceID: "it-ledger", Config: cfg.Targets[0].Probe, Logger: enginetest.Logger(), Report: &reports{}}
	enginetest.OpenLedger(t, testLedgers, "rabbitmq", &pt)
	p, err := rabbitmq.New(pt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	for i := range writes {
		if err := runOp(t, p, probes.OpLedgerWrite); err != nil {
			t.Fatalf("ledger_write: %v", err)
		}
		if i == 0 {
			time.Sleep(settle)
		}
	}
	if got := len(p.Ledger().Entries()); got != writes {
		t.Fatalf("ledger holds %d entries after %d confirmed messages", got, writes)
	}
	b.kill9()
	start := time.Now()
	b.start()
	t.Logf("%s: broker killed with SIGKILL and started again in %s", target, time.Since(start).Round(time.Millisecond))
	deadline := time.Now().Add(90 * time.Second)
	for len(p.Ledger().Entries()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ledger still holds %d entries after 90s", len(p.Ledger().Entries()))
		}
		if err := runOp(t, p, probes.OpLedgerCheck); err != nil {
			if probes.CauseOf(err).DataCause() {
				t.Logf("ledger_check: %.300s", err)
			} else {
				t.Logf("ledger_check (retried): %.300s", err)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return ledgerCounts(t, target)
}

// TestLedgerBrokerKill9 is issue 12's RabbitMQ proof, on a broker of its own:
// messages confirmed into a classic queue as transient (non-persistent) are
// gone after kill -9 and restart and the ledger reports them missing;
// messages confirmed into an established quorum queue all come back intact.
func TestLedgerBrokerKill9(t *testing.T) {
	b := startPrivateBroker(t)
	const writes = 21
	got := ledgerKill9(t, b, "ledger-transient", "{ages: [10s], queue_type: classic, transient: true}", writes, 0)
	stack.Figure(t, "RabbitMQ ledger, classic queue with transient messages, %d confirmed, kill -9: missing %v, intact %v, corrupted %v",
		writes, got["missing"], got["intact"], got["corrupted"])
	if got["missing"] != writes || got["corrupted"] != 0 {
		t.Errorf("transient: checks %v, want all %d missing", got, writes)
	}
	got = ledgerKill9(t, b, "ledger-quorum", "{ages: [10s], queue_type: quorum}", writes, 10*time.Second)
	stack.Figure(t, "RabbitMQ ledger, quorum queue, %d confirmed, kill -9: missing %v, intact %v, corrupted %v",
		writes, got["missing"], got["intact"], got["corrupted"])
	if got["missing"] != 0 || got["intact"] != writes || got["corrupted"] != 0 {
		t.Errorf("quorum: checks %v, want all %d intact", got, writes)
	}
}
