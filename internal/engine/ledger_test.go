package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// keeperConfig is the section of a test backend whose probe keeps a ledger.
type keeperConfig struct {
	Fail bool `yaml:"fail"` // New fails
}

func (*keeperConfig) Validate() []error    { return nil }
func (*keeperConfig) Ops() []probes.OpSpec { return probes.LedgerSpecs() }
func (*keeperConfig) LedgerSettings() ([]time.Duration, int) {
	return []time.Duration{30 * time.Second}, 5
}

// keeperProbe keeps the ledger its Target brought.
type keeperProbe struct{ ledger *probes.Ledger }

func (*keeperProbe) Prepare(context.Context) error                      { return nil }
func (*keeperProbe) Run(context.Context, string, *probes.Outcome) error { return nil }
func (*keeperProbe) Close() error                                       { return nil }

func init() {
	probes.Register(probes.Backend{
		Name:      "ledgerkeeper",
		NewConfig: func() probes.Config { return &keeperConfig{} },
		New: func(t probes.Target) (probes.Probe, error) {
			if t.Config.(*keeperConfig).Fail {
				return nil, errors.New("refused")
			}
			return &keeperProbe{ledger: t.Ledger}, nil
		},
	})
}

// TestRunnerOpensTheLedger: the engine opens a target's durability ledger
// from its store, with the section's ages and bound, hands it to the probe
// in probes.Target.Ledger and closes it after the probe; a probe that cannot
// be built leaves no ledger open, and a backend that keeps none gets none.
func TestRunnerOpensTheLedger(t *testing.T) {
	cfg := parse(t, `
global: {instance_id: t}
targets:
  - {name: kept, backend: ledgerkeeper}
  - {name: refused, backend: ledgerkeeper, ledgerkeeper: {fail: true}}
  - {name: none, backend: noop}
`)
	store := probes.NewLedgerStore("")
	r, err := newRunner(cfg.Targets[0], "t", false, store, discard)
	if err != nil {
		t.Fatal(err)
	}
	l := r.probe.(*keeperProbe).ledger
	if l == nil || l != r.ledger {
		t.Fatalf("the probe holds ledger %p, the runner %p", l, r.ledger)
	}
	st, open := store.Statuses(time.Now())[[2]string{"kept", "ledgerkeeper"}]
	if !open || st.MaxEntries != 5 || strings.Join(st.Ages, ",") != "30s" {
		t.Fatalf("open %v with %+v, want the section's ages [30s] and bound 5", open, st)
	}
	if err := r.closeProbe(); err != nil {
		t.Fatal(err)
	}
	if n := len(store.Statuses(time.Now())); n != 0 {
		t.Errorf("%d ledgers open after the probe closed", n)
	}
	if _, err := newRunner(cfg.Targets[1], "t", false, store, discard); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a probe that cannot be built: %v", err)
	}
	if n := len(store.Statuses(time.Now())); n != 0 {
		t.Errorf("%d ledgers open after the probe could not be built", n)
	}
	r, err = newRunner(cfg.Targets[2], "t", false, store, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.closeProbe() }()
	if r.ledger != nil || len(store.Statuses(time.Now())) != 0 {
		t.Error("a ledger for a backend that keeps none")
	}
}
