package rabbitmq

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

// dialLog records the order in which hang-up nodes (startHangUp) are dialled.
type dialLog struct {
	mu    sync.Mutex
	order []string
}

func (d *dialLog) add(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.order = append(d.order, name)
}

func (d *dialLog) get() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.order...)
}

// startHangUp is a node that accepts TCP connections and closes them at
// once: the AMQP handshake fails there.
func startHangUp(t *testing.T, name string, log *dialLog) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			log.add(name)
			c.Close()
		}
	}()
	return "amqp://canary@" + l.Addr().String() + "/"
}

// closedPort is a URL nothing listens on: the dial is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "amqp://canary@" + addr + "/"
}

func urlsProbe(t *testing.T, urls []string, logs *bytes.Buffer) *Probe {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret-pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig
	c.URLs, c.PasswordFile, c.ConnectTimeout = urls, pw, 5*time.Second
	c.NodeCheckInterval = 0 // these tests count the probe's own dials (nodes_test.go has the checks')
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	p, err := New(probes.Target{Name: "mq", InstanceID: "i1", Config: &c, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestURLsEveryNodeFailing: with no node usable the connect tries each URL
// once, in order, and fails with every node's error (no password); then the
// redial backoff makes the next ops fail fast with that error without
// dialling, and the attempt after the backoff dials again.
func TestURLsEveryNodeFailing(t *testing.T) {
	var order dialLog
	refused := closedPort(t)
	a, b := startHangUp(t, "a", &order), startHangUp(t, "b", &order)
	var logs bytes.Buffer
	p := urlsProbe(t, []string{refused, a, b}, &logs)
	err := p.Prepare(context.Background())
	if err == nil {
		t.Fatal("Prepare succeeded with no broker")
	}
	if got := order.get(); strings.Join(got, ",") != "a,b" {
		t.Errorf("dialled %v, want a then b (after the refused first URL)", got)
	}
	msg := err.Error()
	for _, u := range []string{"rabbitmq: no node of the 3 in urls could be used: ", strip(refused), strip(a), strip(b)} {
		if !strings.Contains(msg, u) {
			t.Errorf("error lacks %q: %s", u, msg)
		}
	}
	if strings.Contains(msg, "s3cret-pass") || strings.Contains(logs.String(), "s3cret-pass") {
		t.Errorf("the password leaked: %s\n%s", msg, logs.String())
	}
	if c := probes.CauseOf(err); c != probes.CauseRefused {
		t.Errorf("cause %s, want refused", c)
	}
	// Within the backoff: the same error, no dial.
	if err2 := p.Prepare(context.Background()); err2 == nil || err2.Error() != msg {
		t.Errorf("within the backoff: %v, want the last error", err2)
	}
	if got := len(order.get()); got != 2 {
		t.Errorf("dialled during the backoff: %v", order.get())
	}
	enginetest.WaitFor(t, 30*time.Second, "a redial after the backoff", func() bool {
		_ = p.Prepare(context.Background())
		return len(order.get()) >= 4
	})
}

// TestURLsStartAtCursor: a connect starts at the node that last worked (the
// cursor) and wraps around; a node that fails moves the cursor past it.
func TestURLsStartAtCursor(t *testing.T) {
	var order dialLog
	urls := []string{startHangUp(t, "a", &order), startHangUp(t, "b", &order), startHangUp(t, "c", &order)}
	var logs bytes.Buffer
	p := urlsProbe(t, urls, &logs)
	p.mu.Lock()
	p.cursor = 1
	err := p.connectLocked(context.Background())
	cursor := p.cursor
	p.mu.Unlock()
	if err == nil {
		t.Fatal("connected to hang-up nodes")
	}
	if got := strings.Join(order.get(), ","); got != "b,c,a" {
		t.Errorf("dialled %s, want b,c,a", got)
	}
	if cursor != 1 {
		t.Errorf("cursor after every node failed from b: %d, want 1 (past a, the last tried)", cursor)
	}
	// The errors name the nodes in the order tried.
	msg := err.Error()
	if ib, ic, ia := strings.Index(msg, strip(urls[1])), strings.Index(msg, strip(urls[2])), strings.Index(msg, strip(urls[0])); ib >= ic || ic >= ia {
		t.Errorf("nodes not named in the order tried: %s", msg)
	}
}

// TestURLsOutOfTime: when the op's deadline passes while dialling, the nodes
// not tried are counted in the error and the next connect starts with them.
func TestURLsOutOfTime(t *testing.T) {
	var order dialLog
	urls := []string{startHangUp(t, "a", &order), startHangUp(t, "b", &order)}
	var logs bytes.Buffer
	p := urlsProbe(t, urls, &logs)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.mu.Lock()
	err := p.connectLocked(ctx)
	cursor := p.cursor
	p.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "1 not tried before the op's deadline") {
		t.Errorf("error %v, want one node not tried", err)
	}
	if cursor != 1 {
		t.Errorf("cursor %d, want 1: the next connect starts with the node not tried", cursor)
	}
}

// TestOneURLErrorUnchanged: with one url the error is that node's, as before urls existed.
func TestOneURLErrorUnchanged(t *testing.T) {
	refused := closedPort(t)
	var logs bytes.Buffer
	p := urlsProbe(t, []string{refused}, &logs)
	err := p.Prepare(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("rabbitmq %s: connect: ", strip(refused))) {
		t.Errorf("error %v, want the node's own", err)
	}
}

// strip is a URL without its user, as the probe names nodes.
func strip(u string) string { return strings.Replace(u, "canary@", "", 1) }

// resettingPort is a URL whose listener resets every connection at once, as
// a broker refusing a client without a certificate can appear to.
func resettingPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	return "amqp://canary@" + l.Addr().String() + "/"
}

// TestResetOverTLSWithoutClientCertHints: a connection reset over TLS with
// no client certificate configured says to check client certificates; with
// one configured, or without TLS, the error is the node's own.
func TestResetOverTLSWithoutClientCertHints(t *testing.T) {
	const hint = "set tls.cert_file and tls.key_file"
	for _, c := range []struct {
		name     string
		tls      probes.TLSConfig
		wantHint bool
	}{
		{"plaintext", probes.TLSConfig{}, false},
		{"tls without a client certificate", probes.TLSConfig{Enabled: true, InsecureSkipVerify: true}, true},
	} {
		var logs bytes.Buffer
		p := urlsProbe(t, []string{resettingPort(t)}, &logs)
		p.cfg.TLS = c.tls
		err := p.Prepare(context.Background())
		if err == nil {
			t.Fatalf("%s: Prepare against a resetting port succeeded", c.name)
		}
		if got := strings.Contains(err.Error(), hint); got != c.wantHint {
			t.Errorf("%s: hint %v, want %v: %v", c.name, got, c.wantHint, err)
		}
	}
}
