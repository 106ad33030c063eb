package cassandra

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// maxFrameBytes bounds a CQL frame body. The driver allocates whatever length
// a frame header claims (up to 256 MiB) before reading it, so a broken or
// hostile server could make the canary allocate 256 MiB per response; the
// canary's own rows are at most a few hundred KiB and schema metadata a few MiB.
const maxFrameBytes = 32 << 20

// guardedDialer dials like the driver's default dialer (TCP, then TLS when
// configured) and wraps the connection in a frameGuard. The cluster is pinned
// to protocol v4, whose frames the guard parses (v5 adds a segment layer).
type guardedDialer struct {
	dialer net.Dialer
	tls    *tls.Config
	conns  *connTrack // the connections that answered, per node (nodes.go)
	// writeTimeout bounds a batched write (the driver's own write timeout
	// is its request timeout).
	writeTimeout time.Duration
}

func (d *guardedDialer) DialHost(ctx context.Context, host *gocql.HostInfo) (*gocql.DialedHost, error) {
	if host.ConnectAddress() == nil || host.Port() == 0 {
		return nil, fmt.Errorf("host %s has no address to connect to", host.HostnameAndPort())
	}
	conn, err := d.dialer.DialContext(ctx, "tcp", host.ConnectAddressAndPort())
	if err != nil {
		return nil, err
	}
	dh, err := gocql.WrapTLS(ctx, conn, host.HostnameAndPort(), d.tls)
	if err != nil {
		return nil, probes.Fail(probes.CauseTLS, err)
	}
	g := &frameGuard{Conn: dh.Conn, track: d.conns, node: host.ConnectAddressAndPort()}
	g.w = &batchWriter{conn: dh.Conn, timeout: d.writeTimeout}
	dh.Conn = g
	// The driver's own coalescer waits on a timer; batchWriter does not (batchwrite.go).
	dh.DisableCoalesce = true
	return dh, nil
}

func newGuardedDialer(connectTimeout, writeTimeout time.Duration, tc *tls.Config) *guardedDialer {
	return &guardedDialer{dialer: net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}, tls: tc, conns: newConnTrack(), writeTimeout: writeTimeout}
}

// frameGuard follows the v3/v4 frame boundaries of what it reads (a 9-byte
// header whose last 4 bytes are the body length, then the body) and fails the
// read, closing the connection, when a header claims more than maxFrameBytes
// or is not a CQL v3-v5 header at all.
type frameGuard struct {
	net.Conn
	hdr    [9]byte
	nhdr   int
	body   int64 // body bytes still to pass
	framed bool  // a whole frame header was read

	track *connTrack // told when the node first answers and when the connection ends
	node  string
	state atomic.Int32 // 0: no answer yet, 1: counted in track, 2: ended

	w *batchWriter // the driver's writes; nil: straight to Conn
}

// Write sends one request frame (the driver writes each frame in one call).
func (g *frameGuard) Write(p []byte) (int, error) {
	if g.w == nil {
		return g.Conn.Write(p)
	}
	return g.w.Write(p)
}

func (g *frameGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if n > 0 {
		if verr := g.scan(p[:n]); verr != nil {
			_ = g.Close()
			return 0, verr
		}
		if g.framed && g.track != nil && g.state.CompareAndSwap(0, 1) {
			g.track.add(g.node, 1)
		}
	}
	if err != nil {
		g.ended()
	}
	return n, err
}

// Close closes the connection and stops counting it as the node's.
func (g *frameGuard) Close() error {
	g.ended()
	return g.Conn.Close()
}

func (g *frameGuard) ended() {
	if g.state.Swap(2) == 1 {
		g.track.add(g.node, -1)
	}
}

func (g *frameGuard) scan(b []byte) error {
	for len(b) > 0 {
		if g.body > 0 {
			k := min(int64(len(b)), g.body)
			g.body -= k
			b = b[k:]
			continue
		}
		k := copy(g.hdr[g.nhdr:], b)
		g.nhdr += k
		b = b[k:]
		if g.nhdr < len(g.hdr) {
			return nil
		}
		g.nhdr = 0
		g.framed = true
		if g.w != nil && int16(binary.BigEndian.Uint16(g.hdr[2:4])) >= 0 {
			g.w.answered() // a response (events come on stream -1)
		}
		if v := g.hdr[0] & 0x7f; v < 3 || v > 5 {
			return probes.Fail(probes.CauseServer, fmt.Errorf("the server sent something that is not a CQL v3-v5 frame (version byte 0x%02x)", g.hdr[0]))
		}
		length := binary.BigEndian.Uint32(g.hdr[5:9])
		if length > maxFrameBytes {
			return probes.Fail(probes.CauseServer, fmt.Errorf("the server sent a CQL frame claiming a %d MiB body (limit %d MiB)", length>>20, maxFrameBytes>>20))
		}
		g.body = int64(length)
	}
	return nil
}
