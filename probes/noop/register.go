package noop

import (
	"errors"

	"github.com/dbcanary/dbcanary/probes"
)

// The one record of the noop backend. It measures the engine's own
// overhead: no rules, no board.
func init() {
	probes.Register(probes.Backend{
		Name:      "noop",
		NewConfig: func() probes.Config { c := DefaultConfig; return &c },
		New: func(t probes.Target) (probes.Probe, error) {
			cfg := *t.Config.(*Config)
			return &Probe{cfg: cfg, err: probes.Fail(probes.Cause(cfg.FailureCause), errors.New("noop: injected failure"))}, nil
		},
		Facts: probes.Facts{NoBoard: true},
		Bench: []probes.BenchProfile{floorProfile()},
	})
}
