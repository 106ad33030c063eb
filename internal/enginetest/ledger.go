package enginetest

import (
	"sync"
	"testing"

	"github.com/dbcanary/dbcanary/internal/ledger"
	"github.com/dbcanary/dbcanary/probes"
)

// AttachLedger hands p, built directly from target, its durability ledger
// from store, as the engine does for a target of the daemon. It returns a
// func that closes the ledger, once: call it after p.Close to simulate a
// stopped dbcanary; it is also called at the end of the test.
func AttachLedger(t testing.TB, store *ledger.LedgerStore, p probes.Probe, backend string, target probes.Target) (closeLedger func()) {
	t.Helper()
	l := store.Attach(p, target.Config, ledger.LedgerOptions{Target: target.Name, Backend: backend, Instance: target.InstanceID,
		Ephemeral: target.Ephemeral, Logger: target.Logger})
	if l == nil {
		t.Fatalf("%s: the probe keeps no durability ledger", target.Name)
	}
	var once sync.Once
	closeLedger = func() {
		once.Do(func() {
			if err := l.Close(); err != nil {
				t.Errorf("closing the durability ledger of %s: %v", target.Name, err)
			}
		})
	}
	t.Cleanup(closeLedger)
	return closeLedger
}
