package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/probes"
)

// Probe is the RabbitMQ canary for one target.
type Probe struct {
	cfg       Config
	target    string
	instance  string
	queue     string
	urls      []string     // the nodes (url or urls), without user info
	node      atomic.Int64 // index in urls of the node connected to or being dialled: error texts name it
	logger    *slog.Logger
	report    probes.Reporter
	certs     probes.CertObserver
	run       uint64 // random per process: tells this run's messages from older ones
	ephemeral bool   // a one-shot run: Close deletes the queue
	led       *ledgerState
	health    *nodeHealth // each node's last known state (NodeStates)

	mu             sync.Mutex // guards the connection state below
	conn           *amqp.Connection
	pub            *amqp.Channel
	pubClosed      chan *amqp.Error // why the broker closed pub, if it did
	flow           *flow            // conn's connection.blocked state
	consuming      bool
	connectedSince time.Time
	connNode       int            // index in urls of conn's node
	cursor         int            // index in urls of the node the next connect tries first
	redial         probes.Backoff // 250 ms doubling to maxReconnectBackoff
	seq            uint64

	pendMu  sync.Mutex // guards pending and clock
	pending map[uint64]pendingMsg
	clock   lossClock

	done      chan struct{}
	stop      context.Context // cancelled by Close: ends the background node checks
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup
}

const maxReconnectBackoff = 2 * time.Second

type pendingMsg struct {
	intended, sent time.Time
	confirmed      bool
	confirmedAt    time.Duration // the loss clock when the broker confirmed it
}

// lossClock measures how long the consumer has demonstrably been able to
// receive. It advances only between two signs of life (a publish confirm, a
// delivery) of the same consuming connection, so neither a broker outage nor
// a restart nor a hung connection not yet detected by heartbeats counts
// towards loss_timeout: messages waiting in a durable queue are not "lost"
// because the consumer could not reach them.
type lossClock struct {
	conn    *amqp.Connection // the connection the mark belongs to
	mark    time.Time        // its last sign of life
	elapsed time.Duration    // live time accumulated so far
}

// alive records a sign of life of conn at t. A new connection starts a new
// mark: the time since the old one's last sign of life does not count.
func (c *lossClock) alive(conn *amqp.Connection, t time.Time) {
	if conn != c.conn {
		c.conn, c.mark = conn, t
		return
	}
	if t.After(c.mark) {
		c.elapsed += t.Sub(c.mark)
		c.mark = t
	}
}

// New builds the probe; it does no I/O itself. Given several nodes (urls),
// it checks those it is not connected to in the background, every
// node_check_interval (NodeStates).
func New(t probes.Target) (*Probe, error) {
	cfg := *t.Config.(*Config)
	var urls []string
	for i, raw := range cfg.nodeURLs() {
		u, err := url.Parse(raw)
		if err != nil {
			if len(cfg.URLs) > 0 {
				return nil, fmt.Errorf("urls[%d]: %v", i, redactURLError(err))
			}
			return nil, fmt.Errorf("url: %v", redactURLError(err))
		}
		if u.User != nil && cfg.Username == "" {
			cfg.Username = u.User.Username()
		}
		u.User = nil
		urls = append(urls, u.String())
	}
	prefix := cfg.QueuePrefix
	if prefix == "" {
		prefix = "dbcanary." + t.Name
	}
	p := &Probe{
		cfg:       cfg,
		target:    t.Name,
		instance:  t.InstanceID,
		queue:     prefix + "." + t.InstanceID,
		urls:      urls,
		logger:    t.Logger,
		report:    t.Report,
		certs:     t.Certs,
		run:       rand.Uint64(),
		ephemeral: t.Ephemeral,
		pending:   map[uint64]pendingMsg{},
		done:      make(chan struct{}),
		redial:    probes.Backoff{Min: 250 * time.Millisecond, Max: maxReconnectBackoff},
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TLS.InsecureSkipVerify {
		p.logger.Warn("TLS certificate verification is disabled for this target (tls.insecure_skip_verify)")
	}
	p.newLedgerState(t.Ledger)
	p.stop, p.cancel = context.WithCancel(context.Background())
	// One url: the probe's own connection is the node's check. A one-shot
	// run exports no metrics: no extra connections either.
	check := len(urls) > 1 && cfg.NodeCheckInterval > 0 && !t.Ephemeral
	p.health = newNodeHealth(urls, !check, p.logger)
	p.wg.Add(1)
	go p.sweepLost()
	if check {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.health.watch(p.stop, cfg.NodeCheckInterval, p.checkNode)
		}()
	}
	return p, nil
}

// nodeURL is the URL of the node connected to (or being dialled), for
// error texts.
func (p *Probe) nodeURL() string {
	if len(p.urls) == 0 {
		return ""
	}
	return p.urls[p.node.Load()]
}

// Queue returns the canary queue's name.
func (p *Probe) Queue() string { return p.queue }

// Prepare connects, declares the canary queue and starts the consumer.
func (p *Probe) Prepare(ctx context.Context) error {
	_, err := p.channel(ctx)
	return err
}

// Run implements probes.Probe. Only publish is scheduled; consume is reported
// by the consumer goroutine for each message it receives.
func (p *Probe) Run(ctx context.Context, op string, out *probes.Outcome) error {
	switch op {
	case OpPublish:
		return p.publish(ctx, out)
	case probes.OpLedgerWrite:
		return p.ledgerWrite(ctx, out)
	case probes.OpLedgerCheck:
		return p.ledgerCheck(ctx, out)
	}
	return fmt.Errorf("rabbitmq: op %q is not scheduled", op)
}

func (p *Probe) publish(ctx context.Context, out *probes.Outcome) error {
	intended := out.Intended
	if intended.IsZero() {
		intended = time.Now()
	}
	err := p.publishOne(ctx, intended, out)
	if err != nil {
		p.consumerDown(intended, err)
	}
	return err
}

// consumerDown reports a consume failure for a failed publish attempt when
// the consumer is not connected either: an op that cannot run says so at
// the publish cadence (one sample per attempt), with the connection's cause,
// instead of going silent for the length of an outage.
func (p *Probe) consumerDown(intended time.Time, err error) {
	p.mu.Lock()
	up := p.conn != nil && !p.conn.IsClosed() && p.consuming
	p.mu.Unlock()
	if up {
		return // the consumer still works: only the publish failed
	}
	// With urls the error names the nodes tried; the last of them, which
	// nodeURL holds, is not where the consumer was.
	where := "rabbitmq"
	if len(p.urls) == 1 {
		where += " " + p.nodeURL()
	}
	now := time.Now()
	p.report.Report(OpConsume, intended, now, now, nil,
		probes.Fail(probes.CauseOf(err), fmt.Errorf("%s: consumer of queue %s not connected: %w", where, p.queue, err)))
}

func (p *Probe) publishOne(ctx context.Context, intended time.Time, out *probes.Outcome) error {
	l, err := p.channel(ctx)
	if err != nil {
		return err
	}
	if err := p.refuseBlocked(l.flow); err != nil {
		return err
	}
	ch, closed, conn := l.pub, l.closed, l.conn
	p.mu.Lock()
	p.seq++
	seq := p.seq
	p.mu.Unlock()
	sent := time.Now()
	body := encode(header{instance: p.instance, run: p.run, seq: seq, intended: intended.UnixNano(), sent: sent.UnixNano()}, p.cfg.MessageSize)
	p.pendMu.Lock()
	p.pending[seq] = pendingMsg{intended: intended, sent: sent}
	p.pendMu.Unlock()
	out.Sent = sent
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", p.queue, false, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		ContentType:  "application/octet-stream",
		Timestamp:    sent,
		Body:         body,
	})
	if err != nil {
		p.forget(seq)
		return p.classify("publish", err)
	}
	ack, err := p.waitConfirm(ctx, dc, l.flow)
	if err != nil {
		p.forget(seq)
		return p.classify("waiting for the publish confirm", err)
	}
	if !ack {
		p.forget(seq)
		if ch.IsClosed() {
			// amqp091 resolves pending confirms as not acked when the channel
			// closes: the broker closed it (e.g. 403, no write permission) or
			// the connection was lost; the close reason, sent first, says which.
			select {
			case ae, ok := <-closed:
				if ok && ae != nil && ae.Code == amqp.AccessRefused {
					return probes.Fail(probes.CauseSetup, fmt.Errorf("rabbitmq %s: user %q may not publish to queue %s through the default exchange: grant write permission on amq.default (see docs/rabbitmq.md): %w",
						p.nodeURL(), p.cfg.Username, p.queue, ae))
				}
				if ok && ae != nil {
					return p.classify("publish", ae)
				}
			default:
			}
			return probes.Fail(probes.CauseRefused, fmt.Errorf("rabbitmq %s: connection lost before the broker confirmed message seq %d", p.nodeURL(), seq))
		}
		// A quorum queue's channel whose first publishes met a leader
		// election can nack every later one (seen on RabbitMQ 3.10 right
		// after a switch of node): the next op starts on a new connection.
		_ = ch.Close()
		return probes.Fail(probes.CauseServer, fmt.Errorf("rabbitmq %s: broker nacked message seq %d on queue %s (the next op reconnects)", p.nodeURL(), seq, p.queue))
	}
	out.BytesSent = int64(len(body))
	now := time.Now()
	p.pendMu.Lock()
	p.clock.alive(conn, now)
	if m, ok := p.pending[seq]; ok {
		m.confirmed, m.confirmedAt = true, p.clock.elapsed
		p.pending[seq] = m
	}
	p.pendMu.Unlock()
	return nil
}

func (p *Probe) forget(seq uint64) {
	p.pendMu.Lock()
	delete(p.pending, seq)
	p.pendMu.Unlock()
}

// link is the open connection as an op uses it.
type link struct {
	pub    *amqp.Channel
	closed <-chan *amqp.Error // why the broker closed pub, if it did
	conn   *amqp.Connection
	flow   *flow // whether the broker blocks conn (a resource alarm)
}

// channel returns the publishing channel, (re)connecting if needed: after a
// connection or channel loss the next op redials, with a backoff of 250 ms
// doubling to 2 s during which ops fail fast with the last dial error: one dial
// per 2 s is no load on a broker, and the target is seen up again within
// ~2 s of the broker's return. A blocked connection (connection.blocked) is
// kept: the broker unblocks it when its alarm clears.
func (p *Probe) channel(ctx context.Context) (link, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil && !p.conn.IsClosed() && p.pub != nil && !p.pub.IsClosed() && p.consuming {
		return link{p.pub, p.pubClosed, p.conn, p.flow}, nil
	}
	if p.conn != nil {
		if p.conn.IsClosed() && len(p.urls) > 1 {
			// The node dropped the connection (it died, was stopped or is
			// unreachable): start the redial at the next node.
			p.cursor = (p.connNode + 1) % len(p.urls)
			p.logger.Info("the connection to the RabbitMQ node is closed: reconnecting, next node first",
				"node", p.urls[p.connNode], "next", p.urls[p.cursor])
		}
		_ = p.conn.Close()
		p.conn, p.pub, p.consuming = nil, nil, false
	}
	if err := p.redial.Wait(time.Now()); err != nil {
		return link{}, err
	}
	if err := p.connectLocked(ctx); err != nil {
		p.redial.Fail(time.Now(), err)
		return link{}, err
	}
	p.redial.Succeed()
	return link{p.pub, p.pubClosed, p.conn, p.flow}, nil
}

// connectLocked connects to the first node that works, trying the URLs in
// order from the cursor (the node that last worked, or the one after a node
// that dropped its connection); a node that fails moves the cursor past it.
// Only when every node failed does the op fail, with each node's error.
// The caller holds p.mu.
func (p *Probe) connectLocked(ctx context.Context) error {
	n, first := len(p.urls), p.cursor
	var errs []error
	for k := range n {
		i := (first + k) % n
		p.node.Store(int64(i))
		err := p.connectNode(ctx, i)
		if err == nil {
			p.connNode, p.cursor = i, i
			attrs := []any{"node", p.urls[i], "queue", p.queue}
			if len(errs) > 0 {
				attrs = append(attrs, "failed", joinErrors(errs))
			}
			p.logger.Info("connected to RabbitMQ node", attrs...)
			return nil
		}
		if p.conn != nil {
			_ = p.conn.Close()
			p.conn, p.pub, p.consuming = nil, nil, false
		}
		errs = append(errs, err)
		p.cursor = (i + 1) % n
		if ctx.Err() != nil {
			break // out of time: the next op starts at the next node
		}
	}
	return p.allFailed(errs)
}

// allFailed is the error of a connect in which no node worked: one node's
// error as it is; for several, each node's error, with the cause of a setup
// mistake if a node reported one (auth, setup: the same on every node of a
// cluster), else the first node's.
func (p *Probe) allFailed(errs []error) error {
	if len(p.urls) == 1 && len(errs) == 1 {
		return errs[0]
	}
	cause := probes.CauseOf(errs[0])
	for _, err := range errs {
		if c := probes.CauseOf(err); c.ConfigCause() {
			cause = c
			break
		}
	}
	msg := fmt.Sprintf("rabbitmq: no node of the %d in urls could be used: %s", len(p.urls), joinErrors(errs))
	if untried := len(p.urls) - len(errs); untried > 0 {
		msg += fmt.Sprintf("; %d not tried before the op's deadline (the next attempt starts with them)", untried)
	}
	return probes.Fail(cause, errors.New(msg))
}

// joinErrors is errs' texts on one line.
func joinErrors(errs []error) string {
	texts := make([]string, len(errs))
	for i, err := range errs {
		texts[i] = err.Error()
	}
	return strings.Join(texts, "; ")
}

// connectNode connects to node i (p.urls[i]), declares the canary queue on
// it and starts the consumer there: a quorum queue is reachable from any
// node of its cluster, so the consumer follows the connection.
func (p *Probe) connectNode(ctx context.Context, i int) error {
	conn, vhost, err := p.dial(ctx, p.urls[i])
	if ctx.Err() == nil {
		p.health.dialled(i, err) // a dial cut short by the op's deadline says nothing of the node
	}
	if err != nil {
		return err
	}
	closes := conn.NotifyClose(make(chan *amqp.Error, 1))
	p.conn = conn
	// Registered before anything is published: the broker sends
	// connection.blocked when the first publish meets an alarm.
	p.flow = newFlow()
	p.wg.Add(1)
	go p.watchFlow(p.flow, conn.NotifyBlocked(make(chan amqp.Blocking, 4)))
	pub, err := conn.Channel()
	if err != nil {
		return p.classify("open channel", err)
	}
	if err := pub.Confirm(false); err != nil {
		return p.classify("enable publisher confirms", err)
	}
	if err := p.declare(pub); err != nil {
		return err
	}
	sub, err := conn.Channel()
	if err != nil {
		return p.classify("open consumer channel", err)
	}
	if err := sub.Qos(100, 0, false); err != nil {
		return p.classify("set consumer prefetch", err)
	}
	deliveries, err := sub.Consume(p.queue, fmt.Sprintf("dbcanary-%s-%x", p.instance, p.run), false, false, false, false, nil)
	if err != nil {
		if isAccessRefused(err) {
			return probes.Fail(probes.CauseSetup, fmt.Errorf("rabbitmq %s: user %q may not consume from queue %s: grant read permission on names matching ^%s in vhost %q: %w",
				p.nodeURL(), p.cfg.Username, p.queue, quoteRE(p.queue), vhost, err))
		}
		return p.classify("consume", err)
	}
	p.pub, p.pubClosed = pub, pub.NotifyClose(make(chan *amqp.Error, 1))
	p.consuming, p.connectedSince = true, time.Now()
	p.pendMu.Lock()
	p.clock.alive(conn, p.connectedSince)
	p.pendMu.Unlock()
	p.wg.Add(1)
	go p.consume(conn, deliveries)
	gen := p.health.connectedTo(i)
	p.wg.Add(1)
	go p.watchClose(gen, closes)
	return nil
}

// dial opens the probe's AMQP connection to the target's vhost on the node
// at dialURL (a URL without user info).
func (p *Probe) dial(ctx context.Context, dialURL string) (*amqp.Connection, string, error) {
	return p.dialAs(ctx, dialURL, "")
}

// dialAs is dial for a purpose other than the probe's connection ("node
// check"), which the connection's name in the broker says.
func (p *Probe) dialAs(ctx context.Context, dialURL, purpose string) (*amqp.Connection, string, error) {
	name := fmt.Sprintf("dbcanary %s %s", p.target, p.instance)
	if purpose != "" {
		name += " " + purpose
	}
	password, err := p.cfg.Password().Value()
	if err != nil {
		return nil, "", probes.Fail(probes.CauseAuth, fmt.Errorf("rabbitmq %s: password: %w", dialURL, err))
	}
	uri, err := amqp.ParseURI(dialURL)
	if err != nil {
		return nil, "", probes.Fail(probes.CauseOther, fmt.Errorf("rabbitmq url: %w", err))
	}
	acfg := amqp.Config{
		SASL:      []amqp.Authentication{&amqp.PlainAuth{Username: p.cfg.Username, Password: password}},
		Vhost:     uri.Vhost,
		Heartbeat: p.cfg.Heartbeat,
		Properties: amqp.Table{
			"connection_name": name,
			"product":         "dbcanary",
		},
		Dial: p.dialer(ctx),
	}
	if uri.Scheme == "amqps" || p.cfg.TLS.Configured() {
		tc, err := p.cfg.TLS.Build(uri.Host, p.certs)
		if err != nil {
			return nil, "", err
		}
		acfg.TLSClientConfig = tc
		if uri.Scheme != "amqps" {
			// DialConfig only wraps the socket in TLS for amqps://; do it here for tls.enabled.
			base := acfg.Dial
			acfg.Dial = func(network, addr string) (net.Conn, error) {
				c, err := base(network, addr)
				if err != nil {
					return nil, err
				}
				return tlsClient(c, tc)
			}
		}
	}
	conn, err := amqp.DialConfig(dialURL, acfg)
	if err != nil {
		return nil, "", p.classifyConnect(dialURL, uri.Vhost, err)
	}
	return conn, uri.Vhost, nil
}

func (p *Probe) declare(ch *amqp.Channel) error {
	args := amqp.Table{
		"x-expires":    p.cfg.QueueExpires.Milliseconds(),
		"x-max-length": int64(p.cfg.MaxLength),
		"x-queue-type": p.cfg.QueueType,
	}
	if _, err := ch.QueueDeclare(p.queue, true, false, false, false, args); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) {
			switch ae.Code {
			case amqp.PreconditionFailed:
				return probes.Fail(probes.CauseServer, fmt.Errorf("canary queue %s exists with other arguments than queue_type=%s queue_expires=%s max_length=%d: delete it (it holds only canary messages) or change the config: %s",
					p.queue, p.cfg.QueueType, p.cfg.QueueExpires, p.cfg.MaxLength, ae.Reason))
			case amqp.AccessRefused:
				return probes.Fail(probes.CauseSetup, fmt.Errorf("rabbitmq %s: user %q may not declare queue %s: grant configure and read permissions on names matching ^%s and write permission on amq.default (see docs/rabbitmq.md): %s",
					p.nodeURL(), p.cfg.Username, p.queue, quoteRE(p.queue), ae.Reason))
			case amqp.NotFound:
				// A durable classic queue whose home node is down: RabbitMQ
				// answers 404 "home node ... is down or inaccessible". The
				// node is unreachable, no data is known lost: not not_found.
				return probes.Fail(probes.CauseServer, fmt.Errorf("rabbitmq %s: declare queue %s: %s (a classic queue lives on one node: with urls, use queue_type: quorum)",
					p.nodeURL(), p.queue, ae.Reason))
			}
		}
		return p.classify("declare queue "+p.queue, err)
	}
	return nil
}

// consume handles deliveries until the channel closes.
func (p *Probe) consume(conn *amqp.Connection, deliveries <-chan amqp.Delivery) {
	defer p.wg.Done()
	for d := range deliveries {
		now := time.Now()
		p.pendMu.Lock()
		p.clock.alive(conn, now)
		p.pendMu.Unlock()
		p.handle(d, now)
		_ = d.Ack(false)
	}
	// The consumer is gone (connection lost, queue deleted, consumer cancelled):
	// mark it so the next op reconnects and re-declares.
	p.mu.Lock()
	if p.conn == conn {
		p.consuming = false
	}
	p.mu.Unlock()
}

// handle verifies one received message and reports it as a consume sample.
func (p *Probe) handle(d amqp.Delivery, now time.Time) {
	h, err := decode(d.Body)
	if err != nil {
		p.reportFailure(now, probes.Fail(probes.CauseMismatch,
			fmt.Errorf("a message in canary queue %s is not a canary message (%d bytes): something else publishes into it", p.queue, len(d.Body))))
		return
	}
	verr := verify(h, d.Body)
	if h.instance != p.instance {
		p.reportFailure(now, probes.Fail(probes.CauseMismatch,
			fmt.Errorf("a message of instance %q arrived in canary queue %s of instance %q", h.instance, p.queue, p.instance)))
		return
	}
	p.pendMu.Lock()
	m, pending := p.pending[h.seq]
	if pending && h.run == p.run {
		delete(p.pending, h.seq)
	}
	p.pendMu.Unlock()
	if h.run != p.run || !pending {
		// From an earlier run of this instance or already counted lost:
		// still proven intact (or not), but its latency means nothing.
		if verr != nil {
			p.reportFailure(now, probes.Fail(probes.CauseMismatch, verr))
		}
		return
	}
	var out probes.Outcome
	out.BytesReceived = int64(len(d.Body))
	if verr != nil {
		p.report.Report(OpConsume, m.intended, m.sent, now, &out, probes.Fail(probes.CauseMismatch, verr))
		return
	}
	p.report.Report(OpConsume, m.intended, m.sent, now, &out, nil)
}

func (p *Probe) reportFailure(now time.Time, err error) {
	p.report.Report(OpConsume, now, now, now, nil, err)
}

// sweepLost counts confirmed messages that did not come back within
// loss_timeout of the loss clock: only time during which the consumer was
// demonstrably connected counts (see lossClock), so a broker outage or
// restart does not turn messages waiting in a durable queue into losses;
// they are received, late, after the reconnect.
func (p *Probe) sweepLost() {
	defer p.wg.Done()
	tick := time.NewTicker(max(p.cfg.LossTimeout/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case now := <-tick.C:
			var lost []pendingMsg
			var seqs []uint64
			p.pendMu.Lock()
			for seq, m := range p.pending {
				if !m.confirmed || p.clock.elapsed-m.confirmedAt < p.cfg.LossTimeout {
					continue
				}
				delete(p.pending, seq)
				lost = append(lost, m)
				seqs = append(seqs, seq)
			}
			p.pendMu.Unlock()
			for i, m := range lost {
				p.report.Report(OpConsume, m.intended, m.sent, now, nil, probes.Fail(probes.CauseLost,
					fmt.Errorf("message seq %d, confirmed by the broker at %s, was not delivered from queue %s within %s of connected time",
						seqs[i], m.sent.Format(time.RFC3339Nano), p.queue, p.cfg.LossTimeout)))
			}
		}
	}
}

// Close implements probes.Probe.
// A one-shot run (Ephemeral) first deletes its queue: its instance id is its
// own, so nobody else reads it, and it should not linger until queue_expires.
func (p *Probe) Close() error {
	var err error
	p.closeOnce.Do(func() { err = p.close() })
	return err
}

func (p *Probe) close() error {
	close(p.done)
	p.cancel()
	p.dropLedgerQueue()
	p.mu.Lock()
	var delErr, err error
	if p.ephemeral {
		delErr = p.deleteQueueLocked()
	}
	if p.conn != nil {
		if reason, _ := p.flow.state(); reason != "" {
			// The broker reads nothing from a blocked connection, not even
			// connection.close: drop it without waiting for a close-ok.
			_ = p.conn.CloseDeadline(time.Now())
		} else {
			err = p.conn.Close()
		}
		p.conn, p.pub, p.consuming = nil, nil, false
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return errors.Join(delErr, err)
}

// deleteQueueLocked deletes the canary queue, on the open connection or a
// new one, within connect_timeout. The caller holds p.mu.
func (p *Probe) deleteQueueLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
	defer cancel()
	conn := p.conn
	if conn != nil && !conn.IsClosed() {
		if err := p.refuseBlocked(p.flow); err != nil {
			return fmt.Errorf("rabbitmq %s: delete queue %s of this one-shot run (it expires after queue_expires %s anyway): %w", p.nodeURL(), p.queue, p.cfg.QueueExpires, err)
		}
	}
	if conn == nil || conn.IsClosed() {
		var err error
		if conn, err = p.dialAny(ctx); err != nil {
			return fmt.Errorf("rabbitmq: delete queue %s of this one-shot run (it expires after queue_expires %s anyway): %w", p.queue, p.cfg.QueueExpires, err)
		}
		defer conn.Close()
	}
	done := make(chan error, 1)
	go func() {
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDelete(p.queue, false, false, false)
			_ = ch.Close()
		}
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = conn.CloseDeadline(time.Now()) // unblocks the channel calls; the broker does not answer
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("rabbitmq %s: delete queue %s of this one-shot run (it expires after queue_expires %s anyway): %w", p.nodeURL(), p.queue, p.cfg.QueueExpires, err)
	}
	p.logger.Debug("deleted the queue of this one-shot run", "queue", p.queue)
	return nil
}

// dialAny opens a connection to the first node that answers, from the
// cursor on, for a one-off task (no queue declared, no consumer).
func (p *Probe) dialAny(ctx context.Context) (*amqp.Connection, error) {
	var errs []error
	for k := range p.urls {
		i := (p.cursor + k) % len(p.urls)
		p.node.Store(int64(i))
		conn, _, err := p.dial(ctx, p.urls[i])
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, p.allFailed(errs)
}

// dialer returns a Dial function bounded by connect_timeout and the op's deadline.
func (p *Probe) dialer(ctx context.Context) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		deadline := time.Now().Add(p.cfg.ConnectTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		dctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		var d net.Dialer
		c, err := d.DialContext(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		// Bounds the TLS and AMQP handshakes; amqp091 clears it once open.
		if err := c.SetDeadline(deadline); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}
}

// classify turns an amqp091 error into a cause with a message naming the
// node connected to.
func (p *Probe) classify(what string, err error) error {
	return p.classifyOn(p.nodeURL(), what, err)
}

// classifyOn is classify for an error on the node at nodeURL.
func (p *Probe) classifyOn(nodeURL, what string, err error) error {
	var pe *probes.Error
	if errors.As(err, &pe) {
		return err
	}
	wrapped := fmt.Errorf("rabbitmq %s: %s: %w", nodeURL, what, err)
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.FrameError:
			// amqp091 reports socket failures during the handshake as 501 with the
			// socket error's text as the reason: classify by that text.
			r := strings.ToLower(ae.Reason)
			switch {
			case strings.Contains(r, "tls:"), strings.Contains(r, "x509:"):
				// A TLS alert from the broker ("remote error: tls: certificate
				// required": a client certificate is missing or was refused).
				return probes.Fail(probes.CauseTLS, wrapped)
			case strings.Contains(r, "timeout"):
				return probes.Fail(probes.CauseTimeout, wrapped)
			case strings.Contains(r, "reset"), strings.Contains(r, "eof"), strings.Contains(r, "broken pipe"), strings.Contains(r, "refused"):
				return probes.Fail(probes.CauseRefused, wrapped)
			}
			if !ae.Server {
				return probes.Fail(probes.CauseRefused, wrapped) // a client-side socket failure
			}
			return probes.Fail(probes.CauseServer, wrapped)
		case amqp.ConnectionForced:
			return probes.Fail(probes.CauseRefused, wrapped) // the broker is shutting down
		case amqp.AccessRefused, amqp.NotAllowed:
			// Credentials are checked at connect (classifyConnect): a refusal
			// on an open connection is a missing permission.
			return probes.Fail(probes.CauseSetup, fmt.Errorf("%w (user %q lacks a permission: see docs/rabbitmq.md)", wrapped, p.cfg.Username))
		case amqp.NotFound:
			return probes.Fail(probes.CauseNotFound, wrapped)
		}
		if errors.Is(err, amqp.ErrClosed) {
			return probes.Fail(probes.CauseRefused, wrapped)
		}
		return probes.Fail(probes.CauseServer, wrapped)
	}
	if c := probes.Classify(err); c != probes.CauseOther {
		return probes.Fail(c, wrapped)
	}
	return probes.Fail(probes.CauseOther, wrapped)
}

// classifyConnect classifies a failed connection handshake with the node at
// nodeURL: rejected credentials are auth; a user whose login works but who
// may not open the vhost (no permissions there, or no such vhost) is setup.
func (p *Probe) classifyConnect(nodeURL, vhost string, err error) error {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		if p.cfg.TLS.CertFile == "" && (strings.HasPrefix(nodeURL, "amqps://") || p.cfg.TLS.Configured()) && resetOrEOF(err) {
			err = fmt.Errorf("%w (%s)", err, noClientCertHint)
		}
		return p.classifyOn(nodeURL, "connect", err)
	}
	wrapped := fmt.Errorf("rabbitmq %s: connect: %w", nodeURL, err)
	switch {
	case ae == amqp.ErrCredentials, ae == amqp.ErrSASL,
		ae.Code == amqp.AccessRefused && strings.Contains(strings.ToLower(ae.Reason), "login"):
		return probes.Fail(probes.CauseAuth, fmt.Errorf("%w (check username and password)", wrapped))
	case ae == amqp.ErrVhost, ae.Code == amqp.NotAllowed && strings.Contains(ae.Reason, "vhost"):
		return probes.Fail(probes.CauseSetup, fmt.Errorf("%w (user %q authenticated but may not use vhost %q: grant permissions there, see docs/rabbitmq.md)", wrapped, p.cfg.Username, vhost))
	}
	return p.classifyOn(nodeURL, "connect", err)
}

// noClientCertHint explains a connection reset right after the TLS handshake
// when no client certificate is configured: with TLS 1.3 a broker with
// fail_if_no_peer_cert refuses the client only after the client's handshake
// has completed, and its certificate_required alert is lost when the
// client's first write meets the closed socket.
const noClientCertHint = "over TLS without a client certificate: a broker with fail_if_no_peer_cert closes such connections after the handshake, which can show only as this reset; set tls.cert_file and tls.key_file if it requires client certificates"

func resetOrEOF(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset by peer")
}

func isAccessRefused(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.AccessRefused
}

func quoteRE(s string) string {
	out := make([]byte, 0, len(s)+4)
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
