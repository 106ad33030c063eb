package enginetest

import (
	"sync"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// OpenLedger opens, from store, the durability ledger of a target that a
// test builds its probe for directly, as the engine does for a target of the
// daemon, and sets target.Ledger: build the probe from target afterwards. It
// returns a func that closes the ledger, once: call it after the probe's
// Close to simulate a stopped dbcanary; it is also called at the end of the
// test, after the probe's cleanups registered later.
func OpenLedger(t testing.TB, store *probes.LedgerStore, backend string, target *probes.Target) (closeLedger func()) {
	t.Helper()
	l := store.OpenFor(target.Config, probes.LedgerOptions{Target: target.Name, Backend: backend, Instance: target.InstanceID,
		Ephemeral: target.Ephemeral, Logger: target.Logger})
	if l == nil {
		t.Fatalf("%s: the %s section keeps no durability ledger", target.Name, backend)
	}
	target.Ledger = l
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
