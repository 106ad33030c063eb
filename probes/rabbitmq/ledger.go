package rabbitmq

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/probes"
)

// LedgerConfig is the `ledger:` block of the rabbitmq section. A queue can
// only be read by consuming it, so each message is read back once, at one age.
type LedgerConfig struct {
	probes.LedgerConfig `yaml:",inline"`
	// QueueType of the ledger queue: classic or quorum; empty means the
	// target's queue_type.
	QueueType string `yaml:"queue_type"`
	// Transient publishes the ledger's messages non-persistent (delivery mode
	// 1) into its classic queue: a broker restart drops them. Only to show
	// that risk; never with quorum queues (they keep every message).
	Transient bool `yaml:"transient"`
}

// defaultLedgerAge is the one age a ledger message is consumed at.
const defaultLedgerAge = 10 * time.Minute

// ledgerBody is the size of a ledger message's random body.
const ledgerBody = 1024

func (c *Config) ledgerAges() []time.Duration {
	if len(c.Ledger.Ages) == 0 {
		return []time.Duration{defaultLedgerAge}
	}
	return c.Ledger.EffectiveAges()
}

func (c *Config) ledgerQueueType() string {
	if c.Ledger.QueueType == "" {
		return c.QueueType
	}
	return c.Ledger.QueueType
}

func (c *Config) validateLedger() []error {
	lc := c.Ledger.LedgerConfig
	lc.Ages = c.ledgerAges()
	errs := lc.Validate(0, "")
	if len(c.Ledger.Ages) > 1 {
		errs = append(errs, probes.Invalid("ledger.ages", "give one age: a queue is read by consuming it, so each ledger message is read back once, got %d", len(c.Ledger.Ages)))
	}
	switch c.Ledger.QueueType {
	case "", "classic", "quorum":
	default:
		errs = append(errs, probes.Invalid("ledger.queue_type", "must be classic or quorum (empty: queue_type), got %q", c.Ledger.QueueType))
	}
	if c.Ledger.Transient && c.ledgerQueueType() == "quorum" {
		errs = append(errs, probes.Invalid("ledger.transient", "a quorum queue keeps every message durably: transient needs ledger.queue_type: classic"))
	}
	return errs
}

// ledgerState is the probe's ledger: its queue, the channel it publishes
// (with confirms) and reads on, and a message read ahead of its entry.
type ledgerState struct {
	l       *probes.Ledger
	queue   string
	setting string

	wmu sync.Mutex // serializes publishes: queue order is seq order
	seq uint64

	cmu    sync.Mutex // serializes checks
	chMu   sync.Mutex
	ch     *amqp.Channel
	conn   *amqp.Connection
	seen   bool           // this process found or created the queue
	held   *amqp.Delivery // read from the queue, newer than the entry checked then
	heldCh *amqp.Channel
}

// newLedgerState names the ledger queue and the durability its writes are
// acknowledged at, and keeps l, the target's ledger (probes.Target.Ledger).
func (p *Probe) newLedgerState(l *probes.Ledger) {
	p.led = &ledgerState{l: l, queue: p.queue + ".ledger"}
	switch {
	case p.cfg.ledgerQueueType() == "quorum":
		p.led.setting = "quorum queue"
	case p.cfg.Ledger.Transient:
		p.led.setting = "classic queue, transient message"
	default:
		p.led.setting = "classic queue, persistent message"
	}
}

// Ledger returns the probe's durability ledger.
func (p *Probe) Ledger() *probes.Ledger { return p.led.l }

// LedgerQueue returns the ledger queue's name.
func (p *Probe) LedgerQueue() string { return p.led.queue }

// ledgerChannel returns the ledger's channel on the probe's connection,
// opening it (confirm mode) and declaring the ledger queue when needed.
func (p *Probe) ledgerChannel(ctx context.Context) (*amqp.Channel, *flow, error) {
	l, err := p.channel(ctx)
	if err != nil {
		return nil, nil, err
	}
	// The broker reads nothing from a blocked connection: not even a declare.
	if err := p.refuseBlocked(l.flow); err != nil {
		return nil, nil, err
	}
	ch, err := p.ledgerChannelOn(l.conn)
	return ch, l.flow, err
}

func (p *Probe) ledgerChannelOn(conn *amqp.Connection) (*amqp.Channel, error) {
	s := p.led
	s.chMu.Lock()
	defer s.chMu.Unlock()
	if s.ch != nil && s.conn == conn && !s.ch.IsClosed() {
		return s.ch, nil
	}
	s.ch, s.conn = nil, nil
	if !s.seen {
		// Does the queue exist? Absent at the first look of this process, it
		// expired (x-expires) or was deleted while dbcanary was down: the
		// messages the ledger remembers cannot be there, by design.
		ch, err := conn.Channel()
		if err != nil {
			return nil, p.classify("open ledger channel", err)
		}
		if _, err := ch.QueueDeclarePassive(s.queue, true, false, false, false, nil); err != nil {
			var ae *amqp.Error
			if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
				return nil, p.classify("look for ledger queue "+s.queue, err)
			}
			if n, ferr := s.l.Forget(time.Now().Add(time.Hour)); n > 0 {
				p.logger.Warn("durability ledger: the ledger queue is absent at start-up (it expired after queue_expires without use, or was deleted, while dbcanary was down): forgetting its messages",
					"queue", s.queue, "entries", n, "err", ferr)
			}
		} else {
			_ = ch.Close()
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, p.classify("open ledger channel", err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, p.classify("enable publisher confirms (ledger)", err)
	}
	args := amqp.Table{
		"x-expires":    p.cfg.QueueExpires.Milliseconds(),
		"x-max-length": int64(max(p.cfg.Ledger.MaxEntries, probes.DefaultLedgerMaxEntries)),
		"x-queue-type": p.cfg.ledgerQueueType(),
	}
	if _, err := ch.QueueDeclare(s.queue, true, false, false, false, args); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
			return nil, probes.Fail(probes.CauseServer, fmt.Errorf("ledger queue %s exists with other arguments than queue_type=%s queue_expires=%s: delete it (it holds only canary messages) or change the config: %s",
				s.queue, p.cfg.ledgerQueueType(), p.cfg.QueueExpires, ae.Reason))
		}
		return nil, p.classify("declare ledger queue "+s.queue, err)
	}
	s.ch, s.conn, s.seen = ch, conn, true
	return ch, nil
}

// ledgerWrite publishes one message into the ledger queue and, once the
// broker confirmed it, records it.
func (p *Probe) ledgerWrite(ctx context.Context, out *probes.Outcome) error {
	ch, fl, err := p.ledgerChannel(ctx)
	if err != nil {
		return err
	}
	s := p.led
	body := make([]byte, ledgerBody)
	_, _ = rand.Read(body)
	mode := amqp.Persistent
	if p.cfg.Ledger.Transient {
		mode = amqp.Transient
	}
	// Held until the entry is recorded: the ledger's order is the queue's.
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.seq++
	key := fmt.Sprintf("%x.%d", p.run, s.seq)
	out.Sent = time.Now()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", s.queue, false, false, amqp.Publishing{
		DeliveryMode: mode, ContentType: "application/octet-stream", MessageId: key, Timestamp: out.Sent, Body: body,
	})
	if err != nil {
		return p.classify("publish (ledger)", err)
	}
	ack, err := p.waitConfirm(ctx, dc, fl)
	if err != nil {
		return p.classify("waiting for the publish confirm (ledger)", err)
	}
	if !ack {
		if ch.IsClosed() {
			return probes.Fail(probes.CauseRefused, fmt.Errorf("rabbitmq %s: connection lost before the broker confirmed ledger message %s", p.nodeURL(), key))
		}
		_ = ch.Close() // the next write opens a new channel (see publishOne)
		return probes.Fail(probes.CauseServer, fmt.Errorf("rabbitmq %s: broker nacked ledger message %s on queue %s", p.nodeURL(), key, s.queue))
	}
	out.BytesSent = int64(len(body))
	if err := s.l.Add(probes.LedgerEntry{Key: key, Where: s.queue, Sum: probes.LedgerSum(body), Size: int64(len(body)), Acked: time.Now(), Setting: s.setting}); err != nil {
		p.logger.Warn("durability ledger: cannot save the file; the write is still checked while this process runs", "err", err)
	}
	return nil
}

// before reports whether entry a was enqueued before entry b: by sequence
// within one run of dbcanary, by acknowledgement time across runs.
func before(a, b probes.LedgerEntry) bool {
	ra, sa, okA := strings.Cut(a.Key, ".")
	rb, sb, okB := strings.Cut(b.Key, ".")
	if okA && okB && ra == rb {
		na, _ := strconv.ParseUint(sa, 10, 64)
		nb, _ := strconv.ParseUint(sb, 10, 64)
		return na < nb
	}
	return a.Acked.Before(b.Acked)
}

// ledgerCheck drains the ledger queue in order against the due entries: a
// message is matched with its entry (intact or corrupted); an entry whose
// message does not come before a newer one, or before the queue is empty,
// was confirmed and never delivered: missing. Messages the ledger does not
// know (forgotten, or from a lost ledger file) are discarded.
func (p *Probe) ledgerCheck(ctx context.Context, out *probes.Outcome) error {
	out.Sent = time.Now()
	s := p.led
	s.cmu.Lock()
	defer s.cmu.Unlock()
	ch, _, err := p.ledgerChannel(ctx)
	if err != nil {
		return err
	}
	known := map[string]probes.LedgerEntry{}
	for _, e := range s.l.Entries() {
		known[e.Key] = e
	}
	read := func(ctx context.Context, d probes.LedgerDue) (probes.LedgerResult, error) {
		for {
			var m amqp.Delivery
			if s.held != nil && s.heldCh == ch && !ch.IsClosed() {
				m = *s.held
			} else {
				got, ok, err := ch.Get(s.queue, false)
				if err != nil {
					return "", p.classify("get (ledger)", err)
				}
				if !ok {
					return probes.LedgerMissing, nil // drained: its message is not there
				}
				m = got
			}
			s.held = nil
			e, isKnown := known[m.MessageId]
			switch {
			case m.MessageId == d.Key:
				if err := m.Ack(false); err != nil {
					return "", p.classify("ack (ledger)", err)
				}
				out.BytesReceived += int64(len(m.Body))
				if probes.LedgerSum(m.Body) != d.Sum {
					return probes.LedgerCorrupted, nil
				}
				return probes.LedgerIntact, nil
			case !isKnown || before(e, d.LedgerEntry):
				if isKnown {
					p.logger.Warn("durability ledger: a message came after the check of its entry; discarded", "key", m.MessageId)
				}
				if err := m.Ack(false); err != nil {
					return "", p.classify("ack (ledger)", err)
				}
			default: // newer than the entry: the entry's message is gone
				s.held, s.heldCh = &m, ch
				return probes.LedgerMissing, nil
			}
		}
	}
	return s.l.Check(ctx, read, nil)
}

// dropLedgerQueue deletes a one-shot run's ledger queue.
func (p *Probe) dropLedgerQueue() {
	s := p.led
	s.chMu.Lock()
	ch := s.ch
	s.chMu.Unlock()
	if p.ephemeral && ch != nil && !ch.IsClosed() {
		_, _ = ch.QueueDelete(s.queue, false, false, false)
	}
}

// LedgerSettings implements probes.LedgerConfigured: the ages and bound the target's ledger is opened with.
func (c *Config) LedgerSettings() ([]time.Duration, int) { return c.ledgerAges(), c.Ledger.MaxEntries }
