package cassandra

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// countingConn counts the writes that reach the connection; the write
// numbered gateAt (1-based) waits for gate to close; failFrom makes every
// write from that number on fail.
type countingConn struct {
	net.Conn
	mu       sync.Mutex
	writes   int
	gateAt   int
	gate     chan struct{}
	failFrom int
	closed   bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	n := c.writes
	c.mu.Unlock()
	if n == c.gateAt {
		<-c.gate
	}
	if c.failFrom > 0 && n >= c.failFrom {
		return 0, errors.New("broken pipe (test)")
	}
	return c.Conn.Write(p)
}

func (c *countingConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

func (c *countingConn) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.writes }

// tcpPair is a real loopback TCP connection: the client end and the server end.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func frames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes.Repeat([]byte{byte('a' + i)}, 100+i)
	}
	return out
}

// readAll reads want bytes from c, failing the test after a generous deadline.
func readAll(t *testing.T, c net.Conn, want int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, want)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %d bytes: %v", want, err)
	}
	return buf
}

func TestBatchWriterIdleConnectionWritesAtOnce(t *testing.T) {
	client, server := tcpPair(t)
	cc := &countingConn{Conn: client}
	w := &batchWriter{conn: cc, timeout: time.Minute}
	for i, f := range frames(5) {
		if n, err := w.Write(f); err != nil || n != len(f) {
			t.Fatalf("write %d: n=%d err=%v", i, n, err)
		}
		// Written by the caller, before Write returned.
		if got := cc.count(); got != i+1 {
			t.Fatalf("after write %d the connection saw %d writes, want %d", i, got, i+1)
		}
		if got := readAll(t, server, len(f)); !bytes.Equal(got, f) {
			t.Fatalf("frame %d arrived as %q", i, got)
		}
		w.answered() // its response: the connection is idle again
	}
}

func TestBatchWriterQueuesFramesWhileRequestsWait(t *testing.T) {
	client, server := tcpPair(t)
	cc := &countingConn{Conn: client, gateAt: 2, gate: make(chan struct{})}
	w := &batchWriter{conn: cc, timeout: time.Minute}
	fs := frames(8)
	var want []byte
	for i, f := range fs {
		// Write 1 goes out at once; the others find a request waiting for
		// its answer and are queued (the flusher's first write is held at
		// the gate until every frame is queued).
		if n, err := w.Write(f); err != nil || n != len(f) {
			t.Fatalf("write %d: n=%d err=%v", i, n, err)
		}
		want = append(want, f...)
	}
	close(cc.gate)
	if got := readAll(t, server, len(want)); !bytes.Equal(got, want) {
		t.Fatal("the frames arrived altered or out of order")
	}
	if got := cc.count(); got > 3 {
		t.Errorf("8 frames took %d writes; want at most 3 (one at once, then batches)", got)
	}
	t.Logf("8 frames in %d writes", cc.count())
}

func TestBatchWriterFailedWriteClosesAndFailsLaterWrites(t *testing.T) {
	client, _ := tcpPair(t)
	cc := &countingConn{Conn: client, failFrom: 2}
	w := &batchWriter{conn: cc, timeout: time.Minute}
	fs := frames(3)
	if _, err := w.Write(fs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(fs[1]); err != nil { // queued: the failure comes later
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := w.Write(fs[2])
		if err != nil {
			if err.Error() != "broken pipe (test)" {
				t.Fatalf("later write failed with %v, want the queued write's error", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the failed queued write never surfaced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cc.mu.Lock()
	closed := cc.closed
	cc.mu.Unlock()
	if !closed {
		t.Error("the connection was not closed after the queued write failed")
	}
}

func TestFrameGuardCountsResponsesNotEvents(t *testing.T) {
	client, server := tcpPair(t)
	g := &frameGuard{Conn: client}
	g.w = &batchWriter{conn: client}
	g.w.waiting.Store(2)
	// A v4 response header on stream 3 with an empty body, then an event
	// on stream -1: only the first is an answer.
	resp := []byte{0x84, 0, 0, 3, 0x08, 0, 0, 0, 0}
	event := []byte{0x84, 0, 0xff, 0xff, 0x0c, 0, 0, 0, 0}
	if _, err := server.Write(append(resp, event...)); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 18)
	if _, err := io.ReadFull(g, buf); err != nil {
		t.Fatal(err)
	}
	if got := g.w.waiting.Load(); got != 1 {
		t.Errorf("waiting = %d after one response and one event, want 1", got)
	}
	g.w.answered()
	g.w.answered() // never below zero
	if got := g.w.waiting.Load(); got != 0 {
		t.Errorf("waiting = %d, want 0", got)
	}
}
