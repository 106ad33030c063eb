package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/probes"
)

// flow is one connection's publishing state as the broker announced it:
// RabbitMQ sends connection.blocked (with its reason, "low on memory",
// "low on disk") when a memory or disk alarm stops it reading from
// publishing connections, and connection.unblocked when the alarm clears.
type flow struct {
	mu      sync.Mutex
	reason  string        // the broker's reason while blocked, "" otherwise
	since   time.Time     // when the current block began
	blocked chan struct{} // closed when the broker blocks; replaced when it unblocks
}

func newFlow() *flow { return &flow{blocked: make(chan struct{})} }

// state returns the broker's reason while blocked ("" otherwise) and a
// channel closed once it blocks.
func (f *flow) state() (string, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reason, f.blocked
}

// set records a notification; it reports whether the state changed and, on
// an unblock, how long the block lasted.
func (f *flow) set(b amqp.Blocking, now time.Time) (changed bool, lasted time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.Active {
		if b.Reason == "" {
			b.Reason = "no reason given"
		}
		changed = f.reason == ""
		if changed {
			f.since = now
			close(f.blocked)
		}
		f.reason = b.Reason
		return changed, 0
	}
	if f.reason == "" {
		return false, 0
	}
	f.reason, f.blocked = "", make(chan struct{})
	return true, now.Sub(f.since)
}

// watchFlow follows conn's connection.blocked / connection.unblocked
// notifications until the connection closes, logging each transition once
// (the ops it fails say it at their own cadence).
func (p *Probe) watchFlow(f *flow, notes <-chan amqp.Blocking) {
	defer p.wg.Done()
	for b := range notes {
		changed, lasted := f.set(b, time.Now())
		switch {
		case !changed:
		case b.Active:
			p.logger.Warn("the broker blocked this connection: publishes fail at once until it unblocks", "err", p.blockedErr(b.Reason))
		default:
			p.logger.Info("the broker unblocked this connection (connection.unblocked): publishing again", "blocked_for", lasted.Round(time.Millisecond))
		}
	}
}

// blockedErr is the failure of an op that needs the broker to read from a
// blocked connection. Cause server: the broker answered, and refuses.
func (p *Probe) blockedErr(reason string) error {
	return probes.Fail(probes.CauseServer, fmt.Errorf("rabbitmq %s: broker blocked publishing: %s (connection.blocked, a memory or disk alarm: rabbitmq-diagnostics alarms, rabbitmqctl status; see docs/runbooks.md)",
		p.nodeURL(), reason))
}

// refuseBlocked fails an op at once while the broker blocks f's connection:
// the broker reads nothing from it until the alarm clears, so the op could
// only wait for its timeout.
func (p *Probe) refuseBlocked(f *flow) error {
	if reason, _ := f.state(); reason != "" {
		return p.blockedErr(reason)
	}
	return nil
}

// waitConfirm waits for the broker's confirm of dc. A connection.blocked
// arriving meanwhile ends the wait at once with the broker's reason instead
// of at the op's timeout; the confirm, if the broker sends it later, is
// dropped (the message is then received but not counted: see handle).
func (p *Probe) waitConfirm(ctx context.Context, dc *amqp.DeferredConfirmation, f *flow) (bool, error) {
	for {
		reason, blocked := f.state()
		if reason != "" {
			select {
			case <-dc.Done(): // confirmed before the block
				return dc.Acked(), nil
			default:
				return false, p.blockedErr(reason)
			}
		}
		select {
		case <-dc.Done():
			return dc.Acked(), nil
		case <-blocked: // look again: blocked now (or already unblocked)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}
