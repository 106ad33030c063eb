package hostile

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

// A garbage server accepts TCP connections on 127.0.0.1 and answers each
// with a behaviour: nonsense, truncated or oversized replies. Every
// connection is closed when the test ends, so a stalling behaviour is bounded.
type garbageServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func serveGarbage(t *testing.T, behave func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &garbageServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // bounded even if the client never hangs up
				behave(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return ln.Addr().String()
}

// stall keeps the connection open, reading and discarding, until the client
// or the test closes it.
func stall(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Behaviours common to every protocol.
var (
	closeAtOnce   = func(c net.Conn) {}
	randomThenEOF = func(c net.Conn) { _, _ = c.Write(randomBytes(64 << 10)) }
	readThenClose = func(c net.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = c.Read(make([]byte, 512))
	}
	silent = stall
)

// CQL: reply to every request frame with a response header claiming a huge
// body, send a few KB of it, then close (or stall).
func cqlClaim(length uint32, thenStall bool) func(net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		var head [9]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, br, int64(binary.BigEndian.Uint32(head[5:9]))); err != nil {
			return
		}
		resp := []byte{0x80 | head[0]&0x7f, 0, head[2], head[3], 0x06 /* SUPPORTED */, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(resp[5:], length)
		_, _ = c.Write(resp)
		_, _ = c.Write(randomBytes(4 << 10))
		if thenStall {
			stall(c)
		}
	}
}

// cqlNonsense answers a request with a valid-looking header of an opcode the
// driver does not expect and a body that is not what the header says.
func cqlNonsense(c net.Conn) {
	br := bufio.NewReader(c)
	for range 16 {
		var head [9]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, br, int64(min(binary.BigEndian.Uint32(head[5:9]), 1<<20))); err != nil {
			return
		}
		body := randomBytes(100)
		resp := []byte{0x80 | head[0]&0x7f, 0, head[2], head[3], 0x08 /* RESULT */, 0, 0, 0, byte(len(body))}
		_, _ = c.Write(append(resp, body...))
	}
}

// AMQP: read the protocol header, then send one of several bad answers.
func amqpAfterHeader(answer []byte, thenStall bool) func(net.Conn) {
	return func(c net.Conn) {
		hdr := make([]byte, 8)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		_, _ = c.Write(answer)
		if thenStall {
			stall(c)
		}
	}
}

// amqpFrame builds a frame: type, channel 0, a size field that may lie, payload, frame-end.
func amqpFrame(typ byte, size uint32, payload []byte) []byte {
	f := []byte{typ, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(f[3:], size)
	f = append(f, payload...)
	return append(f, 0xCE)
}

// connection.start (class 10, method 10), version 0-9, with a server-properties
// table whose length claims 4 GiB.
var amqpStartHugeTable = func() []byte {
	p := []byte{0, 10, 0, 10, 0, 9, 0xFF, 0xFF, 0xFF, 0xF0}
	p = append(p, randomBytes(64)...)
	return amqpFrame(1, uint32(len(p)), p)
}()

// HTTP answers for OpenSearch and S3.
func httpAnswer(head string, body []byte, thenStall bool) func(net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		// Read the request head (bodies are small; the rest is discarded by closing).
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		_, _ = io.WriteString(c, head)
		_, _ = c.Write(body)
		if thenStall {
			stall(c)
		}
	}
}

// httpStream answers 200 with a chunked body of n bytes of garbage: a server
// that really sends a lot.
func httpStream(n int) func(net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		bw := bufio.NewWriterSize(c, 64<<10)
		_, _ = io.WriteString(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
		chunk := randomBytes(64 << 10)
		for sent := 0; sent < n; sent += len(chunk) {
			fmt.Fprintf(bw, "%x\r\n", len(chunk))
			_, _ = bw.Write(chunk)
			if _, err := io.WriteString(bw, "\r\n"); err != nil {
				return
			}
		}
		_, _ = io.WriteString(bw, "0\r\n\r\n")
		_ = bw.Flush()
	}
}

var (
	http1GiBTruncated = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\nETag: \"x\"\r\n\r\n"
	httpHeaderBomb    = "HTTP/1.1 200 OK\r\nX-Bomb: " + strings.Repeat("A", 12<<20) + "\r\n\r\n"
	httpNotHTTP       = string(randomBytes(4 << 10))
	http500Garbage    = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\nContent-Length: 4096\r\n\r\n"
	http401           = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 4096\r\n\r\n"
)

type behaviour struct {
	name  string
	serve func(net.Conn)
	// ok200 marks an HTTP 200 answer: S3 accepts a PUT on a 200 alone (the
	// ETag is not an MD5 on every store), so put may pass; the reads after it fail.
	ok200 bool
}

func commonBehaviours() []behaviour {
	return []behaviour{
		{"close at once", closeAtOnce, false},
		{"read then close", readThenClose, false},
		{"random bytes then EOF", randomThenEOF, false},
		{"silent", silent, false},
	}
}

func httpBehaviours() []behaviour {
	return append(commonBehaviours(),
		behaviour{"200 claiming 1 GiB, 4 KiB then EOF", httpAnswer(http1GiBTruncated, randomBytes(4<<10), false), true},
		behaviour{"200 claiming 1 GiB, 4 KiB then stall", httpAnswer(http1GiBTruncated, randomBytes(4<<10), true), true},
		behaviour{"200 streaming 128 MiB of garbage", httpStream(128 << 20), true},
		behaviour{"200 with a 12 MiB header", httpAnswer(httpHeaderBomb, nil, false), true},
		behaviour{"not HTTP", httpAnswer(httpNotHTTP, nil, false), false},
		behaviour{"500 with garbage body", httpAnswer(http500Garbage, randomBytes(4<<10), false), false},
		behaviour{"401 with garbage body", httpAnswer(http401, randomBytes(4<<10), false), false},
	)
}

// backendCase is one probe pointed at a garbage server.
type backendCase struct {
	backend    string
	section    func(addr string) string
	ops        []string
	behaviours []behaviour
}

func backendCases() []backendCase {
	return []backendCase{
		{
			backend: "cassandra",
			section: func(addr string) string {
				h, p, _ := net.SplitHostPort(addr)
				return fmt.Sprintf("hosts: [%q]\nport: %s\nusername: cassandra\npassword_file: %s\nconnect_timeout: 1s\nrequest_timeout: 1s\nreconnect_interval: 1s", h, p, pw)
			},
			ops: []string{"insert", "read"},
			behaviours: append(commonBehaviours(),
				behaviour{"frame claiming 256 MiB, 4 KiB then EOF", cqlClaim(256<<20, false), false},
				behaviour{"frame claiming 2 GiB, 4 KiB then EOF", cqlClaim(0x7fffffff, false), false},
				behaviour{"frame claiming 256 MiB, 4 KiB then stall", cqlClaim(256<<20, true), false},
				behaviour{"unexpected opcodes", cqlNonsense, false},
			),
		},
		{
			backend: "rabbitmq",
			section: func(addr string) string {
				return fmt.Sprintf("url: amqp://%s/\nusername: dbcanary\npassword_file: %s\nconnect_timeout: 1s", addr, pw)
			},
			ops: []string{"publish"},
			behaviours: append(commonBehaviours(),
				behaviour{"random bytes after the protocol header", amqpAfterHeader(randomBytes(64<<10), false), false},
				behaviour{"frame claiming 4 GiB, then EOF", amqpAfterHeader(append(amqpFrame(1, 0xFFFFFFFF, nil)[:7], randomBytes(4<<10)...), false), false},
				behaviour{"frame claiming 4 GiB, then stall", amqpAfterHeader(append(amqpFrame(1, 0xFFFFFFFF, nil)[:7], randomBytes(4<<10)...), true), false},
				behaviour{"body frame claiming 4 GiB", amqpAfterHeader(append(amqpFrame(3, 0xFFFFFFFF, nil)[:7], randomBytes(4<<10)...), false), false},
				behaviour{"connection.start with a 4 GiB table", amqpAfterHeader(amqpStartHugeTable, false), false},
				behaviour{"protocol header of another version", amqpAfterHeader([]byte("AMQP\x00\x01\x00\x00"), false), false},
			),
		},
		{
			backend: "opensearch",
			section: func(addr string) string {
				return fmt.Sprintf("addresses: [\"http://%s\"]\nusername: admin\npassword_file: %s\nconnect_timeout: 1s\nrequest_timeout: 2s\nmax_retries: 0", addr, pw)
			},
			ops:        []string{"index", "get", "search_default", "bulk"},
			behaviours: httpBehaviours(),
		},
		{
			backend: "s3",
			section: func(addr string) string {
				return fmt.Sprintf("endpoint: \"http://%s\"\naddressing: path\naccess_key_id_file: %s\nsecret_access_key_file: %s\nconnect_timeout: 1s\nsizes: [4KiB]", addr, pw, pw)
			},
			ops:        []string{"put_4KiB", "get_4KiB", "head_4KiB", "delete_4KiB", "list"},
			behaviours: httpBehaviours(),
		},
	}
}

// reporter records async op reports (RabbitMQ consume) for the assertions.
type reporter struct {
	mu   sync.Mutex
	errs []error
}

func (r *reporter) Report(_ string, _, _, _ time.Time, _ *probes.Outcome, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// opTimeout bounds each Prepare and op against a garbage server.
const opTimeout = 2 * time.Second

// peakBound is how far the heap may rise above where it was while a probe
// talks to one garbage server: below the sizes the servers claim (256 MiB to
// 4 GiB) and the 128 MiB one of them streams, above what reading up to a
// 16 MiB response cap costs (a bytes.Buffer growing past it briefly holds
// 48 MiB, plus the transport's buffers).
const peakBound = 96 << 20

// peakHeap samples the heap every millisecond until stop is called and
// returns the highest value seen (runtime/metrics does not stop the world).
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	result := make(chan uint64, 1)
	go func() {
		var peak uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-result }
}

// TestGarbageServers points every probe at servers that answer nonsense on its
// protocol: every Prepare and op must fail with a cause from the fixed set
// (never succeed, never panic), within its timeout, and without allocating
// the sizes the server claims.
func TestGarbageServers(t *testing.T) {
	// net/http logs "Unsolicited response received on idle HTTP channel" with
	// the garbage through the standard logger; keep the test output readable.
	log.SetOutput(io.Discard)
	defer log.SetOutput(os.Stderr)
	secret, err := os.ReadFile(pw)
	if err != nil {
		t.Fatal(err)
	}
	for _, bc := range backendCases() {
		for _, bh := range bc.behaviours {
			t.Run(bc.backend+"/"+bh.name, func(t *testing.T) {
				addr := serveGarbage(t, bh.serve)
				cfg, err := config.Parse([]byte(target(bc.backend, bc.section(addr))))
				if err != nil {
					t.Fatal(err)
				}
				tg := cfg.Targets[0]
				b, _ := probes.Lookup(tg.Backend)

				// Collect almost continuously, so the sampled heap is live
				// memory rather than garbage waiting for the next cycle.
				defer debug.SetGCPercent(debug.SetGCPercent(1))
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				stopPeak := peakHeap()
				rep := &reporter{}
				p, err := b.New(probes.Target{Name: tg.Name, InstanceID: "hostile", Config: tg.Probe, Logger: enginetest.Logger(), Report: rep})
				if err != nil {
					t.Fatal(err)
				}
				var causes []string
				check := func(what string, err error, took time.Duration) {
					t.Helper()
					cause := probes.CauseOf(err)
					causes = append(causes, fmt.Sprintf("%s=%s", what, orOK(cause)))
					if err != nil {
						msg := err.Error()
						if len(msg) > 200 {
							msg = msg[:200] + "..."
						}
						t.Logf("%s: %s: %s", what, cause, msg)
						if strings.Contains(err.Error(), strings.TrimSpace(string(secret))) {
							t.Errorf("%s: the error shows the password", what)
						}
					}
					switch {
					case err == nil && bh.ok200 && bc.backend == "s3" && strings.HasPrefix(what, "put_"):
						// Accepted: see behaviour.ok200.
					case err == nil:
						t.Errorf("%s succeeded against a garbage server", what)
					case !slices.Contains(probes.Causes, cause):
						t.Errorf("%s: cause %q is not one of %v: %v", what, cause, probes.Causes, err)
					}
					if took > opTimeout+5*time.Second {
						t.Errorf("%s took %s, its timeout is %s", what, took, opTimeout)
					}
				}
				run := func(what string, f func(ctx context.Context) error) {
					ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
					defer cancel()
					start := time.Now()
					err := f(ctx)
					// As the engine does: a run cut by its deadline is a timeout.
					if err != nil && ctx.Err() == context.DeadlineExceeded && !probes.CauseOf(err).DataCause() {
						err = probes.Fail(probes.CauseTimeout, err)
					}
					check(what, err, time.Since(start))
				}
				run("prepare", p.Prepare)
				for _, op := range bc.ops {
					run(op, func(ctx context.Context) error {
						var out probes.Outcome
						out.Reset(time.Now())
						return p.Run(ctx, op, &out)
					})
				}
				closed := make(chan error, 1)
				go func() { closed <- p.Close() }()
				select {
				case <-closed:
				case <-time.After(30 * time.Second):
					t.Fatal("Close did not return within 30 s")
				}
				rep.mu.Lock()
				for _, err := range rep.errs {
					check("async report", err, 0)
				}
				rep.mu.Unlock()

				peak := stopPeak()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				allocated := after.TotalAlloc - before.TotalAlloc
				runtime.GC()
				runtime.ReadMemStats(&after)
				rise := int64(peak) - int64(before.HeapAlloc)
				t.Logf("%s; heap peak %+.1f MiB, allocated %.1f MiB in total, heap after %+.1f MiB", strings.Join(causes, " "),
					float64(rise)/(1<<20), float64(allocated)/(1<<20), (float64(after.HeapAlloc)-float64(before.HeapAlloc))/(1<<20))
				bound := int64(peakBound)
				if raceEnabled {
					bound *= 2 // the race detector slows reads and the collector: more garbage is in flight
				}
				if rise > bound {
					t.Errorf("the heap rose by %d MiB while the probe talked to a garbage server (bound %d MiB): it trusts a size the server claims or buffers what it streams",
						rise>>20, bound>>20)
				}
				if after.HeapAlloc > before.HeapAlloc+16<<20 {
					t.Errorf("heap grew by %d MiB after Close", (after.HeapAlloc-before.HeapAlloc)>>20)
				}
			})
		}
	}
}

func orOK(c probes.Cause) string {
	if c == "" {
		return "ok"
	}
	return string(c)
}
