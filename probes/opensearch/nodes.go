package opensearch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchtransport"
)

// How dbcanary_store_node_up knows an OpenSearch node's state.
//
// With several addresses, the driver's own view, read every driverInterval
// without a request: its transport marks a node dead when a request routed
// to it fails (round-robin gives every node requests within seconds at the
// shipped rates) and alive again once its health check (GET /) passes
// (resurrection backs off to about 30 s at most).
//
// With one address the driver never marks it dead (its single-node pool
// ignores failures), so a GET / every checkInterval, with the probe's auth,
// TLS and timeouts, decides.
const (
	driverInterval = time.Second
	checkInterval  = 30 * time.Second
)

// A node's state as last seen.
const (
	nodeUnknown int32 = iota // not seen yet: no series
	nodeUp
	nodeDown
)

// watchedNode is one configured address.
type watchedNode struct {
	label string // host:port: the node label (an address never holds credentials)
	key   string // scheme://host: how the driver's connection to it is matched
	url   string // the address with a trailing /: GET / of the check
	state atomic.Int32
	// checked is when the watch last asked GET / of a node the driver holds
	// dead (the watch's goroutine only).
	checked time.Time
}

// nodeWatch keeps each address's state up to date in the background, so
// NodeStates (read at every scrape) only loads atomics.
type nodeWatch struct {
	nodes    []*watchedNode
	interval time.Duration
	round    func(ctx context.Context) // one look at every node
	logger   *slog.Logger

	mu      sync.Mutex
	cancel  context.CancelFunc // nil until started
	done    chan struct{}
	stopped bool
}

// newNodeWatch watches the configured addresses: through the driver's view
// with several, with a GET / on tr with one. It does no I/O.
func (p *Probe) newNodeWatch(tr http.RoundTripper) *nodeWatch {
	w := &nodeWatch{logger: p.logger}
	for _, a := range p.cfg.Addresses {
		u, err := url.Parse(a)
		if err != nil || u.Host == "" {
			continue // Validate has reported it
		}
		w.nodes = append(w.nodes, &watchedNode{label: nodeLabel(u), key: connKey(u), url: strings.TrimRight(a, "/") + "/"})
	}
	if len(w.nodes) > 1 {
		w.interval = driverInterval
		w.round = func(ctx context.Context) {
			w.fromDriver(ctx, p.client.Client.Metrics, func(ctx context.Context, u string) error { return p.checkNode(ctx, tr, u) })
		}
		return w
	}
	w.interval = checkInterval
	w.round = func(ctx context.Context) {
		for _, n := range w.nodes {
			err := p.checkNode(ctx, tr, n.url)
			if ctx.Err() != nil {
				return // stopped: a cancelled check says nothing of the node
			}
			w.set(n, err)
		}
	}
	return w
}

// nodeLabel is host:port as dialled (the scheme's port when none is given).
func nodeLabel(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func connKey(u *url.URL) string { return u.Scheme + "://" + u.Host }

// NodeStates reports each configured address (host:port) and whether its
// node is up: nothing before the first look (at the target's first Prepare).
func (p *Probe) NodeStates() iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		for _, n := range p.nodes.nodes {
			st := n.state.Load()
			if st == nodeUnknown {
				continue
			}
			if !yield(n.label, st == nodeUp) {
				return
			}
		}
	}
}

// errDriverDead is the reason logged for a node the driver marked dead.
var errDriverDead = errors.New("the client marked it dead: a request to it failed and its health check (GET /) has not passed since")

// fromDriver sets each node from the driver's connections: up unless dead,
// and a node the driver holds dead is asked GET / itself (at once when it
// goes dead, then every checkInterval): down only if that gets no answer or
// a 5xx. The driver's own health check wants a 200, which a least-privilege
// canary user without cluster:monitor/main never gets (403): the driver
// would hold a node that failed one request dead for ever, and the gauge
// with it (a false ticket, and with two such nodes a false page).
func (w *nodeWatch) fromDriver(ctx context.Context, metrics func() (opensearchtransport.Metrics, error), check func(ctx context.Context, url string) error) {
	m, _ := metrics() // an error comes from optional callbacks; the connections are still listed
	dead := map[string]bool{}
	for _, c := range m.Connections {
		cm, ok := c.(opensearchtransport.ConnectionMetric)
		if !ok {
			continue
		}
		u, err := url.Parse(cm.URL)
		if err != nil {
			continue
		}
		dead[connKey(u)] = dead[connKey(u)] || cm.IsDead
	}
	for _, n := range w.nodes {
		d, listed := dead[n.key]
		switch {
		case !listed:
		case d:
			if n.state.Load() != nodeDown || time.Since(n.checked) >= checkInterval {
				n.checked = time.Now()
				err := check(ctx, n.url)
				if ctx.Err() != nil {
					return // stopped: a cancelled check says nothing of the node
				}
				if err != nil {
					err = fmt.Errorf("%w; GET /: %w", errDriverDead, err)
				}
				w.set(n, err)
			}
		default:
			w.set(n, nil)
		}
	}
}

// checkNode is GET / on one node: up if it answers below 500.
func (p *Probe) checkNode(ctx context.Context, tr http.RoundTripper, u string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	_ = p.authorize(req) // as the driver's health check: without the password the node answers 401, read as down
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	_ = resp.Body.Close()
	// A node that answers is up: a least-privilege canary user lacks
	// cluster:monitor/main and gets 403, a wrong password 401 (the ops report
	// those as auth and setup). A 5xx is a node that cannot serve.
	if resp.StatusCode >= 500 {
		return fmt.Errorf("GET / answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// set records a node's state (err nil: up) and logs a change once.
func (w *nodeWatch) set(n *watchedNode, err error) {
	st := nodeUp
	if err != nil {
		st = nodeDown
	}
	prev := n.state.Swap(st)
	switch {
	case prev == st, len(w.nodes) < 2:
		// One address: its node down is the target down, and the op's
		// error says so.
	case st == nodeDown:
		w.logger.Warn("opensearch node is down", "node", n.label, "err", err)
	case prev == nodeDown:
		w.logger.Info("opensearch node is up again", "node", n.label)
	}
}

// start starts the watch (once; never after stop).
func (w *nodeWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil || w.stopped || len(w.nodes) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go w.run(ctx)
}

func (w *nodeWatch) run(ctx context.Context) {
	defer close(w.done)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		w.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// stop ends the watch and waits for its goroutine.
func (w *nodeWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
