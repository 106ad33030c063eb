package opensearch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchtransport"
	"go.uber.org/goleak"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

func TestNodeLabel(t *testing.T) {
	for in, want := range map[string]string{
		"http://os-1:9200":       "os-1:9200",
		"https://os-1:9200/":     "os-1:9200",
		"http://os-1":            "os-1:80",
		"https://search.example": "search.example:443",
		"http://[::1]:9200/os/":  "[::1]:9200",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := nodeLabel(u); got != want {
			t.Errorf("nodeLabel(%s) = %s, want %s", in, got, want)
		}
	}
}

// node is a fake OpenSearch node that can be killed and brought back on
// the same port.
type node struct {
	t    *testing.T
	addr string
	srv  *http.Server
	// auth counts GET / requests by Authorization header.
	mu   sync.Mutex
	auth map[string]int
}

func newNode(t *testing.T) *node {
	n := &node{t: t, auth: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	n.serve(ln)
	t.Cleanup(n.kill)
	return n
}

func (n *node) url() string { return "http://" + n.addr }

func (n *node) serve(ln net.Listener) {
	n.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			n.mu.Lock()
			n.auth[r.Header.Get("Authorization")]++
			n.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"version":{"number":"2.19.6"}}`))
	})}
	go func() { _ = n.srv.Serve(ln) }()
}

// kill closes the listener and every connection: the port refuses.
func (n *node) kill() { _ = n.srv.Close() }

// revive listens on the same port again.
func (n *node) revive() {
	var ln net.Listener
	var err error
	enginetest.WaitFor(n.t, 10*time.Second, "the port "+n.addr+" free again", func() bool {
		ln, err = net.Listen("tcp", n.addr)
		return err == nil
	})
	n.serve(ln)
}

// logCount counts log lines containing a message.
type logCount struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCount) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logCount) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), msg)
}

func nodeProbe(t *testing.T, edit func(*Config), logs *logCount, addrs ...string) *Probe {
	t.Helper()
	c := DefaultConfig
	c.Addresses = addrs
	c.RequestTimeout = 2 * time.Second
	if edit != nil {
		edit(&c)
	}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("config: %v", errs)
	}
	p, err := New(probes.Target{Name: "os", InstanceID: "unit-1", Config: &c, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func states(p *Probe) map[string]bool { return maps.Collect(p.NodeStates()) }

func waitStates(t *testing.T, p *Probe, want map[string]bool, timeout time.Duration, what string) {
	t.Helper()
	enginetest.WaitFor(t, timeout, what, func() bool { return maps.Equal(states(p), want) })
}

// TestNodeStatesFromDriver: with several addresses the gauge follows the
// driver's view: a node whose request failed is down, back once the
// driver's health check resurrected it; each change is logged once.
func TestNodeStatesFromDriver(t *testing.T) {
	n1, n2 := newNode(t), newNode(t)
	logs := &logCount{}
	p := nodeProbe(t, nil, logs, n1.url(), n2.url())
	if got := states(p); len(got) != 0 {
		t.Fatalf("NodeStates before the watch started: %v, want none", got)
	}
	p.nodes.interval = 10 * time.Millisecond
	p.nodes.start()
	waitStates(t, p, map[string]bool{n1.addr: true, n2.addr: true}, 5*time.Second, "both nodes up")

	n2.kill()
	// Round-robin: within a few requests one goes to node 2, fails and is
	// retried on node 1; the driver marks node 2 dead.
	var failed atomic.Int64
	enginetest.WaitFor(t, 10*time.Second, "node 2 down", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, _, err := p.do(ctx, request{what: "ping", method: http.MethodGet, path: "/"}, nil); err != nil {
			failed.Add(1)
		}
		return maps.Equal(states(p), map[string]bool{n1.addr: true, n2.addr: false})
	})
	if failed.Load() != 0 {
		t.Errorf("%d requests failed with one node of two down: the driver retries on the other", failed.Load())
	}
	n2.revive()
	t0 := time.Now()
	waitStates(t, p, map[string]bool{n1.addr: true, n2.addr: true}, 30*time.Second, "node 2 up again (the driver's resurrection)")
	t.Logf("node 2 up again %s after it listened again", time.Since(t0).Round(100*time.Millisecond))
	if d, u := logs.count("opensearch node is down"), logs.count("opensearch node is up again"); d != 1 || u != 1 {
		t.Errorf("logged %d downs and %d ups, want 1 each:\n%s", d, u, logs.buf.String())
	}
}

// TestNodeStatesCheck: with one address the driver never marks the node
// dead, so the watch asks GET / itself, with the probe's credentials.
func TestNodeStatesCheck(t *testing.T) {
	n := newNode(t)
	logs := &logCount{}
	p := nodeProbe(t, func(c *Config) { c.Username, c.PasswordFile = "canary", "testdata/password" }, logs, n.url()+"/")
	p.nodes.interval = 10 * time.Millisecond
	p.nodes.start()
	p.nodes.start() // a second Prepare starts nothing more
	waitStates(t, p, map[string]bool{n.addr: true}, 5*time.Second, "the node up")
	n.mu.Lock()
	auth := maps.Clone(n.auth)
	n.mu.Unlock()
	for h := range auth {
		if !strings.HasPrefix(h, "Basic ") {
			t.Errorf("GET / with Authorization %q, want basic auth", h)
		}
	}
	if len(auth) == 0 {
		t.Error("no GET / reached the node")
	}

	n.kill()
	waitStates(t, p, map[string]bool{n.addr: false}, 5*time.Second, "the node down")
	time.Sleep(50 * time.Millisecond) // several more checks: still one log line
	n.revive()
	waitStates(t, p, map[string]bool{n.addr: true}, 5*time.Second, "the node up again")
	// One address: its node down is the target down, which the ops report;
	// no log line of its own (a `once` run's output stays the ops' table).
	if d, u := logs.count("opensearch node is down"), logs.count("opensearch node is up again"); d != 0 || u != 0 {
		t.Errorf("logged %d downs and %d ups with one address, want none:\n%s", d, u, logs.buf.String())
	}
	if strings.Contains(logs.buf.String(), "secret") {
		t.Errorf("the log holds the password:\n%s", logs.buf.String())
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.nodes.done:
	default:
		t.Fatal("the node watch still runs after Close")
	}
}

// TestNodeWatchStopBeforeStart: a probe closed before its first Prepare
// never starts the watch.
func TestNodeWatchStopBeforeStart(t *testing.T) {
	n := newNode(t)
	p := nodeProbe(t, nil, &logCount{}, n.url())
	p.nodes.stop()
	p.nodes.start()
	if p.nodes.cancel != nil {
		t.Fatal("the watch started after stop")
	}
}

// TestNodeStatesDriverView pins how the driver's connection list is read:
// matched by scheme and host, dead or not.
func TestNodeStatesDriverView(t *testing.T) {
	logs := &logCount{}
	p := nodeProbe(t, nil, logs, "http://10.0.0.1:9200", "http://10.0.0.2:9200/", "http://10.0.0.3:9200")
	view := func(dead ...bool) func() (opensearchtransport.Metrics, error) {
		return func() (opensearchtransport.Metrics, error) {
			var m opensearchtransport.Metrics
			for i, d := range dead {
				m.Connections = append(m.Connections, opensearchtransport.ConnectionMetric{URL: "http://10.0.0." + string(rune('1'+i)) + ":9200", IsDead: d})
			}
			return m, nil
		}
	}
	// The check of a node the driver holds dead: node 2 answers nothing.
	checks := 0
	gone := func(context.Context, string) error { checks++; return errors.New("connection refused") }
	ctx := context.Background()
	p.nodes.fromDriver(ctx, view(false, true), gone)
	want := map[string]bool{"10.0.0.1:9200": true, "10.0.0.2:9200": false} // node 3 not listed: not seen yet
	if got := states(p); !maps.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	p.nodes.fromDriver(ctx, view(false, true, false), gone)
	if checks != 1 {
		t.Errorf("%d checks of the dead node within checkInterval, want 1", checks)
	}
	p.nodes.fromDriver(ctx, view(false, false, false), gone)
	want = map[string]bool{"10.0.0.1:9200": true, "10.0.0.2:9200": true, "10.0.0.3:9200": true}
	if got := states(p); !maps.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	if d, u := logs.count("opensearch node is down"), logs.count("opensearch node is up again"); d != 1 || u != 1 {
		t.Errorf("logged %d downs and %d ups, want 1 each:\n%s", d, u, logs.buf.String())
	}
}

// TestNodeWatchLeavesNoGoroutine: Close stops the check and closes its
// connections (test/leak checks the same on a real node).
func TestNodeWatchLeavesNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	n := newNode(t)
	c := DefaultConfig
	c.Addresses = []string{n.url()}
	p, err := New(probes.Target{Name: "os", InstanceID: "unit-1", Config: &c})
	if err != nil {
		t.Fatal(err)
	}
	p.nodes.interval = 10 * time.Millisecond
	p.nodes.start()
	waitStates(t, p, map[string]bool{n.addr: true}, 5*time.Second, "the node up")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	n.kill()
	goleak.VerifyNone(t, ignore)
}

// TestNodeCheckAnswerIsUp: a node that answers GET / is up whatever the
// canary user may do there (a least-privilege user gets 403, a wrong
// password 401: the ops report those); a 5xx is down.
func TestNodeCheckAnswerIsUp(t *testing.T) {
	for _, c := range []struct {
		status int
		up     bool
	}{{http.StatusForbidden, true}, {http.StatusUnauthorized, true}, {http.StatusOK, true}, {http.StatusServiceUnavailable, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(c.status) }))
		p := nodeProbe(t, nil, &logCount{}, srv.URL+"/")
		err := p.checkNode(context.Background(), http.DefaultTransport, srv.URL+"/")
		if (err == nil) != c.up {
			t.Errorf("GET / answered %d: check error %v, want up %v", c.status, err, c.up)
		}
		srv.Close()
	}
}

// TestNodeStatesDriverDeadButAnswering: a node the driver holds dead that
// answers GET / (here 403, a least-privilege user's answer, which the
// driver's health check never accepts) is up: the driver's view alone would
// hold it down for ever.
func TestNodeStatesDriverDeadButAnswering(t *testing.T) {
	p := nodeProbe(t, nil, &logCount{}, "http://10.0.0.1:9200", "http://10.0.0.2:9200")
	view := func() (opensearchtransport.Metrics, error) {
		return opensearchtransport.Metrics{Connections: []fmt.Stringer{
			opensearchtransport.ConnectionMetric{URL: "http://10.0.0.1:9200"},
			opensearchtransport.ConnectionMetric{URL: "http://10.0.0.2:9200", IsDead: true}}}, nil
	}
	p.nodes.fromDriver(context.Background(), view, func(context.Context, string) error { return nil })
	if got := states(p); !maps.Equal(got, map[string]bool{"10.0.0.1:9200": true, "10.0.0.2:9200": true}) {
		t.Errorf("states %v, want both up", got)
	}
}
