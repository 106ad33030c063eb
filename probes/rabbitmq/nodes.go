package rabbitmq

import (
	"context"
	"iter"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// nodeState is what the probe last saw of one node.
type nodeState uint8

const (
	nodeUnknown nodeState = iota // never seen, or forgotten: not exported
	nodeUp
	nodeDown
)

// nodeHealth is each node's last known state, for NodeStates
// (dbcanary_store_node_up), behind a lock of its own: p.mu is held across
// dials, which a scrape must not wait for. The node the probe's connection is
// open to is up while that connection is; the others are known from the
// probe's own connect attempts and from the background checks (checkNodes).
type nodeHealth struct {
	logger *slog.Logger
	names  []string // host:port of each URL: the node label
	// forget: no background checks, so a node other than the connected one
	// would keep its last state for ever: once a connection is open, only
	// its node is reported.
	forget bool

	mu        sync.Mutex
	state     []nodeState
	since     []time.Time // when state last changed
	connected int         // the node the probe's connection is open to; -1: none
	gen       uint64      // that connection's number: a late close of an older one is ignored
}

func newNodeHealth(urls []string, forget bool, logger *slog.Logger) *nodeHealth {
	h := &nodeHealth{logger: logger, forget: forget, connected: -1,
		state: make([]nodeState, len(urls)), since: make([]time.Time, len(urls))}
	for _, u := range urls {
		h.names = append(h.names, nodeName(u))
	}
	return h
}

// nodeName is host:port of a node's URL (the scheme's default port if it
// names none); the URLs carry no user info.
func nodeName(raw string) string {
	if uri, err := amqp.ParseURI(raw); err == nil {
		return net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	}
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return raw
}

// set records node i's state at now and, with several urls, logs a change
// (not a first "up": every node starts so). The caller holds h.mu.
func (h *nodeHealth) set(i int, s nodeState, err error, now time.Time) {
	was := h.state[i]
	if was == s {
		return
	}
	h.state[i] = s
	lasted := now.Sub(h.since[i])
	h.since[i] = now
	if len(h.names) < 2 {
		return // one url: its node down is the target down, and the op's error says so
	}
	switch {
	case s == nodeDown:
		h.logger.Info("RabbitMQ node is down", "node", h.names[i], "err", err)
	case s == nodeUp && was == nodeDown:
		h.logger.Info("RabbitMQ node is up again", "node", h.names[i], "down_for", lasted.Round(time.Second))
	}
}

// connectedTo records that the probe's connection to node i is open and
// returns the connection's number, for closed.
func (h *nodeHealth) connectedTo(i int) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	h.connected = i
	now := time.Now()
	h.set(i, nodeUp, nil, now)
	if h.forget {
		for j := range h.state {
			if j != i {
				h.state[j], h.since[j] = nodeUnknown, now
			}
		}
	}
	return h.gen
}

// closed records the end of connection gen: err is the broker's or the
// network's reason (the node went, or dropped the connection), nil if the
// probe closed it (its node stays as it was).
func (h *nodeHealth) closed(gen uint64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.gen || h.connected < 0 {
		return
	}
	i := h.connected
	h.connected = -1
	if err != nil {
		h.set(i, nodeDown, err, time.Now())
	}
}

// checked records the outcome of a background check of node i. A check of
// the node the probe is connected to says nothing its connection does not.
func (h *nodeHealth) checked(i int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i != h.connected {
		h.set(i, outcome(err), err, time.Now())
	}
}

// dialled records the outcome of the probe's own dial of node i: its
// earlier connection, if any, is gone, whether or not its close was seen.
func (h *nodeHealth) dialled(i int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.set(i, outcome(err), err, time.Now())
}

func outcome(err error) nodeState {
	if err != nil {
		return nodeDown
	}
	return nodeUp
}

// isConnected tells whether the probe's connection is open to node i.
func (h *nodeHealth) isConnected(i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.connected == i
}

// states yields the known nodes and whether each is up.
func (h *nodeHealth) states() iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		h.mu.Lock()
		state := append([]nodeState(nil), h.state...)
		h.mu.Unlock()
		for i, s := range state {
			if s != nodeUnknown && !yield(h.names[i], s == nodeUp) {
				return
			}
		}
	}
}

// watch checks, at once and then every interval until ctx ends, each node
// the probe is not connected to (check: an AMQP handshake, then a close).
// A check cut short by ctx says nothing of its node.
func (h *nodeHealth) watch(ctx context.Context, interval time.Duration, check func(ctx context.Context, i int) error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		for i := range h.names {
			if ctx.Err() != nil {
				return
			}
			if h.isConnected(i) {
				continue
			}
			err := check(ctx, i)
			if ctx.Err() != nil {
				return
			}
			h.checked(i, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// NodeStates implements engine.NodeStater: each node of url or urls
// (host:port) and whether it is up. The node the probe is connected to is up
// while its connection is open; another is up if its last handshake (the
// probe's connect, or the background check every node_check_interval)
// succeeded. A node not yet seen is left out, and with node_check_interval 0
// every node but the connected one once a connection is open. Cached: it
// never waits for the network.
func (p *Probe) NodeStates() iter.Seq2[string, bool] {
	return p.health.states()
}

// watchClose follows the probe's connection gen to node i until it closes.
func (p *Probe) watchClose(gen uint64, closes <-chan *amqp.Error) {
	defer p.wg.Done()
	var reason error
	for e := range closes {
		if e != nil {
			reason = e
		}
	}
	p.health.closed(gen, reason)
}

// checkNode is one background check of node i: an AMQP handshake as the
// probe's own (TLS, credentials, vhost, connect_timeout), then a close.
func (p *Probe) checkNode(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	conn, _, err := p.dialAs(ctx, p.urls[i], "node check")
	if err != nil {
		return err
	}
	// The handshake succeeded: the node is up whatever the close does.
	_ = conn.CloseDeadline(time.Now().Add(p.cfg.ConnectTimeout))
	return nil
}
