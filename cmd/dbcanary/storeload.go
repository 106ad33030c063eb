package main

import (
	"fmt"
	"io"

	"github.com/dbcanary/dbcanary/internal/config"
)

// storeLoad is the load a target's resolved ops put on its store: ops per
// second (async ops, which follow another op, are not counted) and payload
// bytes per second each way, from the ops' payload estimates
// (probes.OpSpec.Sent and Received) at their configured rates.
type storeLoad struct {
	ops, sent, received float64
}

func storeLoadOf(t *config.Target) storeLoad {
	var l storeLoad
	specs := t.Probe.Ops()
	for _, op := range t.Resolved {
		if op.Async || op.Rate <= 0 {
			continue
		}
		l.ops += op.Rate
		for _, s := range specs {
			if s.Name == op.Name {
				l.sent += op.Rate * s.Sent
				l.received += op.Rate * s.Received
				break
			}
		}
	}
	return l
}

// byteRate renders bytes per second in binary units.
func byteRate(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB/s", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB/s", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B/s", v)
}

// printStoreLoad writes each target's expected load and the instance's total:
// what one more dbcanary (one more sidecar) costs each store.
func printStoreLoad(w io.Writer, cfg *config.Config) {
	var total storeLoad
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		l := storeLoadOf(t)
		total.ops, total.sent, total.received = total.ops+l.ops, total.sent+l.sent, total.received+l.received
		fmt.Fprintf(w, "  %s (%s): %.2f ops/s, %s to the store, %s from it\n", t.Name, t.Backend, l.ops, byteRate(l.sent), byteRate(l.received))
	}
	fmt.Fprintf(w, "  this instance: %.2f ops/s, %s to the stores, %s from them (payload; measured figures: docs/load.md)\n",
		total.ops, byteRate(total.sent), byteRate(total.received))
}
