//go:build integration

package faults

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// relay is a plain TCP forwarder in front of the Toxiproxy proxy that counts
// the connections dbcanary opens: Toxiproxy keeps no such counter, and while
// the proxy is disabled nothing else sees the attempts. When the proxy
// refuses or resets, the relay resets dbcanary's connection in turn, so the
// probe sees a reset either way (cause "refused").
type relay struct {
	ln       net.Listener
	upstream string
	attempts atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startRelay(t *testing.T, upstream string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(r.close)
	return r
}

// Addr is where dbcanary connects.
func (r *relay) Addr() string { return r.ln.Addr().String() }

// Attempts is the number of connections dbcanary opened so far.
func (r *relay) Attempts() int64 { return r.attempts.Load() }

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // listener closed
		}
		r.attempts.Add(1)
		if !r.track(c) {
			_ = c.Close()
			return
		}
		r.wg.Add(1)
		go r.handle(c)
	}
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

func (r *relay) handle(c net.Conn) {
	defer r.wg.Done()
	defer r.untrack(c)
	u, err := net.DialTimeout("tcp", r.upstream, 5*time.Second)
	if err != nil {
		reset(c)
		return
	}
	if !r.track(u) {
		_ = u.Close()
		_ = c.Close()
		return
	}
	defer r.untrack(u)
	done := make(chan error, 2)
	go func() { done <- copyErr(u, c) }()
	go func() { done <- copyErr(c, u) }()
	err = <-done
	// One side ended: end both, and pass a reset on as a reset.
	if err != nil {
		reset(c)
		reset(u)
	} else {
		_ = c.Close()
		_ = u.Close()
	}
	<-done
}

func copyErr(dst, src net.Conn) error {
	_, err := io.Copy(dst, src)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// reset closes with SO_LINGER 0: the peer gets an RST, not a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (r *relay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
