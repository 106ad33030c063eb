//go:build integration

package cassandra_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

// BenchmarkOverhead compares dbcanary's cost per op — the engine's own per-op
// path (deadline, prepare gate, the probe, the sample hand-off) driven as
// `dbcanary bench` drives it (engine.Load, closed loop, one worker) — with a
// bare driver loop running the same statements (1 insert : 4 reads, blobs of
// uniform(1..10000) and uniform(1..100000) bytes, CL ONE, read back and
// compared) against the same node, in interleaved blocks so both see the same
// node state.
//
//	go test -tags integration -run '^$' -bench Overhead -benchtime 2000x ./probes/cassandra/
func BenchmarkOverhead(b *testing.B) {
	a := admin(b)
	mustExec(b, a, `DROP KEYSPACE IF EXISTS dbcanary_bench`)
	cfg := enginetest.Parse(b, engineConfig("bench", "bench", "insert: {rate: 1}\nread: {rate: 1}", section(b, "dbcanary_bench", "read_min_age: 0s")))
	t := cfg.Targets[0]
	t.Timeout = time.Minute // bounds Prepare, which creates the keyspace; each op keeps its own 10s
	l, err := engine.NewLoad(t, "bench", enginetest.Logger())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(10 * time.Second)
	ctx := context.Background()
	if err := l.Prepare(ctx); err != nil { // creates the keyspace the bare loop uses too
		b.Fatal(err)
	}
	var (
		mu       sync.Mutex
		firstErr error
	)
	l.SetSink(func(s engine.Sample) {
		mu.Lock()
		defer mu.Unlock()
		if s.Err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", s.Op, s.Err)
		}
	})
	// runOps runs n ops of the mix, one after the other, through the engine.
	mix := []engine.Weighted{{Op: "insert", Weight: 1}, {Op: "read", Weight: 4}}
	runOps := func(n int) {
		if _, err := l.Run(ctx, engine.Stage{Mix: mix, Workers: 1, MaxOps: int64(n)}); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil {
			b.Fatal(firstErr)
		}
	}
	bare := newBareLoop(b)
	ops := []string{"insert", "read", "read", "read", "read"}
	// Warm both paths (prepared statements, connections, JIT on the node).
	for i := range 200 {
		if err := bare.op(ctx, ops[i%5]); err != nil {
			b.Fatal(err)
		}
	}
	runOps(200)
	const block = 50
	var bareDur, probeDur time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		t0 := time.Now()
		for i := range n {
			if err := bare.op(ctx, ops[(done+i)%5]); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		runOps(n)
		bareDur += t1.Sub(t0)
		probeDur += time.Since(t1)
	}
	b.StopTimer()
	bareNs := float64(bareDur.Nanoseconds()) / float64(b.N)
	probeNs := float64(probeDur.Nanoseconds()) / float64(b.N)
	b.ReportMetric(bareNs, "bare-ns/op")
	b.ReportMetric(probeNs, "dbcanary-ns/op")
	b.ReportMetric(probeNs/bareNs, "ratio")
	b.Logf("ops=%d bare %.0f ns/op, dbcanary %.0f ns/op, ratio %.3f", b.N, bareNs, probeNs, probeNs/bareNs)
}

// bareLoop is the same workload written directly against the driver.
type bareLoop struct {
	s    *gocql.Session
	pool []byte
	keys []bareKey
}

type bareKey struct {
	key        gocql.UUID
	aOff, aLen int
	bOff, bLen int
}

func newBareLoop(b *testing.B) *bareLoop {
	pw, err := os.ReadFile(env.Get(b, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"))
	if err != nil {
		b.Fatal(err)
	}
	cl := gocql.NewCluster(host())
	cl.Port = port()
	// Connection settings as the probe's: protocol v4 (v5's checksummed framing
	// alone costs more than dbcanary does) and no write coalescing (it waits
	// up to 200 us per write to batch, which a canary's sparse ops never fill).
	cl.ProtoVersion = 4
	cl.WriteCoalesceWaitTime = 0
	cl.NumConns = 1
	cl.Consistency = gocql.One
	cl.Timeout = 5 * time.Second
	cl.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(env.Get(b, "DBCANARY_TEST_CASSANDRA_DC")))
	cl.Authenticator = gocql.PasswordAuthenticator{Username: env.Get(b, "DBCANARY_TEST_CASSANDRA_USER"), Password: string(pw)}
	s, err := cl.CreateSession()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	pool := make([]byte, 100000+1<<16)
	for i := range pool {
		pool[i] = byte(rand.Uint32())
	}
	return &bareLoop{s: s, pool: pool}
}

func (l *bareLoop) op(ctx context.Context, op string) error {
	if op == "insert" || len(l.keys) == 0 {
		k := bareKey{key: gocql.MustRandomUUID(), aLen: 1 + rand.IntN(10000), bLen: 1 + rand.IntN(100000)}
		k.aOff, k.bOff = rand.IntN(len(l.pool)-k.aLen), rand.IntN(len(l.pool)-k.bLen)
		err := l.s.Query(`INSERT INTO dbcanary_bench.mixed_workload (key, a, b) VALUES (?, ?, ?) USING TTL ?`,
			k.key, l.pool[k.aOff:k.aOff+k.aLen], l.pool[k.bOff:k.bOff+k.bLen], 3600).Consistency(gocql.One).ExecContext(ctx)
		if err == nil && len(l.keys) < 1000 {
			l.keys = append(l.keys, k)
		}
		return err
	}
	k := l.keys[rand.IntN(len(l.keys))]
	var key gocql.UUID
	var a, b []byte
	if err := l.s.Query(`SELECT * FROM dbcanary_bench.mixed_workload WHERE key = ?`, k.key).Consistency(gocql.One).ScanContext(ctx, &key, &a, &b); err != nil {
		return err
	}
	if !bytes.Equal(a, l.pool[k.aOff:k.aOff+k.aLen]) || !bytes.Equal(b, l.pool[k.bOff:k.bOff+k.bLen]) {
		return errMismatch
	}
	return nil
}

var errMismatch = probes.Fail(probes.CauseMismatch, nil)
