// Package noop is a probe that talks to nothing. It measures the engine's own
// overhead (as Mongoose's dummy storage driver does) and drives the scheduler
// tests: a configurable delay, failure ratio and cause.
package noop

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// Config is the `noop:` section of a target.
type Config struct {
	// Delay is how long each op takes (0: return at once).
	Delay time.Duration `yaml:"delay"`
	// FailureRatio is the fraction of ops that fail, 0..1.
	FailureRatio float64 `yaml:"failure_ratio"`
	// FailureCause is the cause failed ops report.
	FailureCause string `yaml:"failure_cause"`
	// PayloadBytes is counted as bytes sent and received per op.
	PayloadBytes int64 `yaml:"payload_bytes"`
}

// DefaultConfig is the noop section's defaults.
var DefaultConfig = Config{FailureCause: string(probes.CauseServer)}

// Validate implements probes.Config.
func (c *Config) Validate() []error {
	var errs []error
	if c.Delay < 0 {
		errs = append(errs, probes.Invalid("delay", "must not be negative"))
	}
	if !(c.FailureRatio >= 0 && c.FailureRatio <= 1) { // also rejects NaN
		errs = append(errs, probes.Invalid("failure_ratio", "must be between 0 and 1, got %g", c.FailureRatio))
	}
	if !validCause(probes.Cause(c.FailureCause)) {
		errs = append(errs, probes.Invalid("failure_cause", "unknown cause %q (one of %v)", c.FailureCause, probes.Causes))
	}
	if c.PayloadBytes < 0 {
		errs = append(errs, probes.Invalid("payload_bytes", "must not be negative"))
	}
	return errs
}

func validCause(c probes.Cause) bool {
	for _, k := range probes.Causes {
		if k == c {
			return true
		}
	}
	return false
}

// Ops implements probes.Config.
func (c *Config) Ops() []probes.OpSpec {
	return []probes.OpSpec{{Name: "noop", DefaultRate: 1, Help: "does nothing for `delay`, fails with `failure_cause` at `failure_ratio`"}}
}

// Endpoints implements probes.Endpointer: the noop probe connects nowhere,
// so `dbcanary bench` runs it anywhere.
func (c *Config) Endpoints() []string { return nil }

// Probe is the noop probe.
type Probe struct {
	cfg Config
	err error
}

// Prepare implements probes.Probe.
func (p *Probe) Prepare(context.Context) error { return nil }

// Run implements probes.Probe.
func (p *Probe) Run(ctx context.Context, _ string, out *probes.Outcome) error {
	if p.cfg.Delay > 0 {
		t := time.NewTimer(p.cfg.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	out.BytesSent, out.BytesReceived = p.cfg.PayloadBytes, p.cfg.PayloadBytes
	if p.cfg.FailureRatio > 0 && rand.Float64() < p.cfg.FailureRatio {
		return p.err
	}
	return nil
}

// Close implements probes.Probe.
func (p *Probe) Close() error { return nil }
