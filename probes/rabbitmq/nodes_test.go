package rabbitmq

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

// syncBuffer is a log sink safe for the checker's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func healthStates(h *nodeHealth) map[string]bool {
	return maps.Collect(h.states())
}

var threeNodes = []string{"amqp://10.0.0.1:5672/", "amqp://10.0.0.2:5672/", "amqp://10.0.0.3:5672/"}

func TestNodeName(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://127.0.0.1:15801/":  "127.0.0.1:15801",
		"amqps://mq-0.mq.svc/mail": "mq-0.mq.svc:5671",
		"amqp://mq-1/":             "mq-1:5672",
		"amqp://[::1]:5673/":       "[::1]:5673",
	} {
		if got := nodeName(in); got != want {
			t.Errorf("nodeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNodeHealthConnection: the connected node is up while its connection is
// open; a close with a reason (the node went) makes it down, a close by the
// probe leaves it as it was; a close of an older connection changes nothing;
// a background check never overrides the connection, the probe's own dial does.
func TestNodeHealthConnection(t *testing.T) {
	var logs syncBuffer
	h := newNodeHealth(threeNodes, false, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := healthStates(h); len(got) != 0 {
		t.Fatalf("nodes never seen are reported: %v", got)
	}
	gen := h.connectedTo(0)
	h.checked(0, errors.New("check refused")) // the connection says more
	if got, want := healthStates(h), map[string]bool{"10.0.0.1:5672": true}; !maps.Equal(got, want) {
		t.Errorf("connected to node 1: %v, want %v", got, want)
	}
	h.closed(gen, nil) // closed by the probe (a reconnect): no verdict on the node
	if got := healthStates(h); !got["10.0.0.1:5672"] {
		t.Errorf("after the probe closed its connection: %v, want node 1 still up", got)
	}
	gen = h.connectedTo(0)
	old := gen
	h.closed(gen, errors.New("Exception (501) Reason: EOF"))
	if got := healthStates(h); got["10.0.0.1:5672"] {
		t.Errorf("after the node dropped the connection: %v, want node 1 down", got)
	}
	h.dialled(1, nil)
	gen = h.connectedTo(1)
	h.closed(old, errors.New("late")) // an older connection's close
	if got, want := healthStates(h), map[string]bool{"10.0.0.1:5672": false, "10.0.0.2:5672": true}; !maps.Equal(got, want) {
		t.Errorf("a late close of an old connection changed the states: %v, want %v", got, want)
	}
	h.dialled(0, nil)
	if !healthStates(h)["10.0.0.1:5672"] {
		t.Errorf("a successful dial of node 1 did not make it up")
	}
	h.closed(gen, nil)
	h.dialled(1, errors.New("refused")) // the probe's dial of the node it was connected to
	if healthStates(h)["10.0.0.2:5672"] {
		t.Errorf("a failed dial of node 2 left it up")
	}
	if n := strings.Count(logs.String(), `msg="RabbitMQ node is down" node=10.0.0.1:5672`); n != 1 {
		t.Errorf("node 1 down logged %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), `msg="RabbitMQ node is up again" node=10.0.0.1:5672`); n != 1 {
		t.Errorf("node 1 up again logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestNodeHealthForget: with no background checks, a connection open
// reports its node alone: the others would keep a stale state.
func TestNodeHealthForget(t *testing.T) {
	h := newNodeHealth(threeNodes, true, slog.New(slog.DiscardHandler))
	h.dialled(0, errors.New("refused"))
	if got, want := healthStates(h), map[string]bool{"10.0.0.1:5672": false}; !maps.Equal(got, want) {
		t.Errorf("every dial failed so far: %v, want %v", got, want)
	}
	h.dialled(1, nil)
	h.connectedTo(1)
	if got, want := healthStates(h), map[string]bool{"10.0.0.2:5672": true}; !maps.Equal(got, want) {
		t.Errorf("connected to node 2 without checks: %v, want %v", got, want)
	}
}

// fakeChecks is a check function whose outcome per node the test sets; it
// counts the checks per node.
type fakeChecks struct {
	mu    sync.Mutex
	fail  map[int]error
	calls map[int]int
}

func (f *fakeChecks) check(ctx context.Context, i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[i]++
	return f.fail[i]
}

func (f *fakeChecks) set(i int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[i] = err
}

func (f *fakeChecks) count(i int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[i]
}

// TestNodeHealthWatch: the checks skip the connected node, take a failing
// node down at once and up again at the next successful check, and log each
// change once however many checks repeat it; they stop when ctx ends.
func TestNodeHealthWatch(t *testing.T) {
	var logs syncBuffer
	h := newNodeHealth(threeNodes, false, slog.New(slog.NewTextHandler(&logs, nil)))
	h.dialled(0, nil)
	h.connectedTo(0)
	f := &fakeChecks{fail: map[int]error{2: errors.New("dial tcp 10.0.0.3:5672: connect: connection refused")}, calls: map[int]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.watch(ctx, 5*time.Millisecond, f.check)
	}()
	defer func() { cancel(); <-done }()

	down := map[string]bool{"10.0.0.1:5672": true, "10.0.0.2:5672": true, "10.0.0.3:5672": false}
	enginetest.WaitFor(t, 10*time.Second, "node 3 down, 1 and 2 up", func() bool { return maps.Equal(healthStates(h), down) })
	base := f.count(2)
	enginetest.WaitFor(t, 10*time.Second, "five more checks of node 3", func() bool { return f.count(2) >= base+5 })
	if !maps.Equal(healthStates(h), down) {
		t.Errorf("states changed with node 3 still failing: %v", healthStates(h))
	}
	f.set(2, nil)
	up := map[string]bool{"10.0.0.1:5672": true, "10.0.0.2:5672": true, "10.0.0.3:5672": true}
	enginetest.WaitFor(t, 10*time.Second, "node 3 up again", func() bool { return maps.Equal(healthStates(h), up) })
	if n := f.count(0); n != 0 {
		t.Errorf("the connected node was checked %d times", n)
	}
	out := logs.String()
	if n := strings.Count(out, `msg="RabbitMQ node is down" node=10.0.0.3:5672`); n != 1 {
		t.Errorf("node 3 down logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, `msg="RabbitMQ node is up again" node=10.0.0.3:5672`); n != 1 {
		t.Errorf("node 3 up again logged %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, "10.0.0.2") {
		t.Errorf("node 2, up throughout, was logged:\n%s", out)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not return when its context ended")
	}
}

// TestNodeHealthWatchCancelledCheck: a check cut short by the end of ctx
// (Close) records nothing.
func TestNodeHealthWatchCancelledCheck(t *testing.T) {
	h := newNodeHealth(threeNodes[:2], false, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	h.watch(ctx, time.Hour, func(ctx context.Context, i int) error {
		cancel()
		return ctx.Err()
	})
	if got := healthStates(h); len(got) != 0 {
		t.Errorf("a cancelled check was recorded: %v", got)
	}
}

// checkerRunning tells whether a node checker goroutine is alive.
func checkerRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*nodeHealth).watch")
}

func nodesProbe(t *testing.T, urls []string, interval time.Duration, logs *syncBuffer) *Probe {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret-pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig
	c.PasswordFile, c.ConnectTimeout, c.NodeCheckInterval = pw, 2*time.Second, interval
	if len(urls) == 1 {
		c.URL = urls[0]
	} else {
		c.URLs = urls
	}
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	p, err := New(probes.Target{Name: "mq", InstanceID: "i1", Config: &c, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNodeChecksOnNodes: given urls, the probe checks every node by itself
// (here: nodes whose handshake fails), labels them host:port without the
// user, and its checker stops on Close.
func TestNodeChecksOnNodes(t *testing.T) {
	if checkerRunning() {
		t.Fatal("a node checker runs before the test")
	}
	var order dialLog
	a, b := startHangUp(t, "a", &order), startHangUp(t, "b", &order)
	var logs syncBuffer
	p := nodesProbe(t, []string{a, b}, time.Second, &logs)
	want := map[string]bool{strings.TrimSuffix(strings.TrimPrefix(a, "amqp://canary@"), "/"): false,
		strings.TrimSuffix(strings.TrimPrefix(b, "amqp://canary@"), "/"): false}
	enginetest.WaitFor(t, 20*time.Second, "both nodes checked down", func() bool { return maps.Equal(maps.Collect(p.NodeStates()), want) })
	enginetest.WaitFor(t, 20*time.Second, "a second round of checks", func() bool { return len(order.get()) >= 4 })
	if n := strings.Count(logs.String(), `msg="RabbitMQ node is down"`); n != 2 {
		t.Errorf("%d down logs for two nodes down over two rounds, want 2:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "s3cret-pass") || strings.Contains(logs.String(), "canary@") {
		t.Errorf("a check's log shows credentials:\n%s", logs.String())
	}
	// NodeStates never waits for the probe's lock (held across a connect).
	p.mu.Lock()
	got := make(chan map[string]bool, 1)
	go func() { got <- maps.Collect(p.NodeStates()) }()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Error("NodeStates waited for the probe's connection lock")
	}
	p.mu.Unlock()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if checkerRunning() {
		t.Error("the node checker outlived Close")
	}
}

// TestNodeChecksOneURL: with one url the probe's own connection is the
// check: no checker, no dial before an op; a failed connect makes the node
// down.
func TestNodeChecksOneURL(t *testing.T) {
	var order dialLog
	a := startHangUp(t, "a", &order)
	var logs syncBuffer
	p := nodesProbe(t, []string{a}, time.Second, &logs)
	defer p.Close()
	if checkerRunning() {
		t.Error("a node checker runs for a single url")
	}
	if got := maps.Collect(p.NodeStates()); len(got) != 0 {
		t.Errorf("states before any connect: %v", got)
	}
	if err := p.Prepare(context.Background()); err == nil {
		t.Fatal("Prepare succeeded against a hang-up node")
	}
	if got, want := maps.Collect(p.NodeStates()), map[string]bool{strings.TrimSuffix(strings.TrimPrefix(a, "amqp://canary@"), "/"): false}; !maps.Equal(got, want) {
		t.Errorf("after a failed connect: %v, want %v", got, want)
	}
	if n := len(order.get()); n != 1 {
		t.Errorf("%d dials, want the probe's one", n)
	}
}

// TestNodeChecksOff: node_check_interval 0 starts no checker.
func TestNodeChecksOff(t *testing.T) {
	var order dialLog
	var logs syncBuffer
	p := nodesProbe(t, []string{startHangUp(t, "a", &order), startHangUp(t, "b", &order)}, 0, &logs)
	defer p.Close()
	if checkerRunning() {
		t.Error("a node checker runs with node_check_interval 0")
	}
}
