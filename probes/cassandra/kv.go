package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// profileKV is the table of Rama's Cassandra benchmarks (test.test: pk, ck,
// value text). Only the bench profiles set it (kv.go, rama.go): it is no
// value of the YAML profile key.
const profileKV = "rama_kv"

// OpBatchInsert writes a batch of rows of random UUIDs (Rama's max write
// throughput benchmark).
const OpBatchInsert = "batch_insert"

// kvConfig shapes the kv table's ops; set by the bench profiles only.
type kvConfig struct {
	// Batch is the rows of one batch_insert.
	Batch int
	// Rows is the prepared key space: the first Rows inserts write keys
	// 0, 2, 4, ...; a read picks a key in [0, 2*Rows): even ones were
	// written, odd ones never are.
	Rows int
	// Recycle makes read go round the prepared keys in order, all hits
	// (Mongoose's recycle mode), instead of half hits, half misses.
	Recycle bool
}

// kvState is what this instance knows of its kv rows.
type kvState struct {
	next   atomic.Int64 // inserts so far: the next key is 2*next
	cursor atomic.Int64 // recycle: the next prepared key to read
	mu     sync.Mutex
	acked  []uint64 // bit n: the insert of key 2n (n < Rows) was acknowledged
}

func newKVState(rows int) *kvState { return &kvState{acked: make([]uint64, (rows+63)/64)} }

func (k *kvState) ack(n int64) {
	k.mu.Lock()
	k.acked[n/64] |= 1 << (n % 64)
	k.mu.Unlock()
}

func (k *kvState) isAcked(n int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.acked[n/64]&(1<<(n%64)) != 0
}

func (k *kvState) reset() {
	k.mu.Lock()
	clear(k.acked)
	k.mu.Unlock()
	k.next.Store(0)
}

// kvStatements are the kv table's insert and read, Rama's prepared statements.
func (p *Probe) kvStatements() {
	p.table = "kv"
	p.kv = newKVState(p.cfg.kv.Rows)
	p.stmts.kvInsert = fmt.Sprintf("INSERT INTO %s.kv (pk, ck, value) VALUES (?, ?, ?) USING TTL ?", p.cfg.Keyspace)
	p.stmts.kvRead = fmt.Sprintf("SELECT value FROM %s.kv WHERE pk = ? AND ck = ?", p.cfg.Keyspace)
}

// kvPK is the partition key of key n: the instance's own, so runs never meet.
func (p *Probe) kvPK(n int64) string { return p.instance + ":" + strconv.FormatInt(n, 10) }

// batchInsert writes one unlogged batch of rows whose pk, ck and value are
// random UUIDs, as Rama's max write throughput benchmark does.
func (p *Probe) batchInsert(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	b := s.Batch(gocql.UnloggedBatch).Consistency(p.cl[OpBatchInsert])
	var sent int64
	for range p.cfg.kv.Batch {
		var v [3]string
		for i := range v {
			u, err := gocql.RandomUUID()
			if err != nil {
				return probes.Fail(probes.CauseOther, fmt.Errorf("cassandra: random key: %w", err))
			}
			v[i] = u.String()
			sent += int64(len(v[i]))
		}
		b.Query(p.stmts.kvInsert, v[0], v[1], v[2], p.ttlSeconds)
	}
	out.Sent = time.Now()
	if err := b.ExecContext(ctx); err != nil {
		return p.opErr(s, OpBatchInsert, err)
	}
	p.noteResult(s, nil)
	out.BytesSent += sent
	return nil
}

// kvInsert writes the next key (Rama's mixed benchmark: each write's id is
// the previous one plus two, stringified into pk, ck and value).
func (p *Probe) kvInsert(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	n := p.kv.next.Add(1) - 1
	id := strconv.FormatInt(2*n, 10)
	out.Sent = time.Now()
	if err := s.Query(p.stmts.kvInsert, p.kvPK(2*n), id, id, p.ttlSeconds).Consistency(p.cl[OpInsert]).ExecContext(ctx); err != nil {
		return p.opErr(s, OpInsert, err)
	}
	p.noteResult(s, nil)
	if n < int64(p.cfg.kv.Rows) {
		p.kv.ack(n)
	}
	out.BytesSent += int64(2 * len(id))
	return nil
}

// kvRead reads a key of the prepared space: at random (half are never
// written: they must come back empty), or in recycle mode the next written
// one in order. A written key must hold its own id as value.
func (p *Probe) kvRead(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	key, ok := p.kvPick()
	if !ok {
		return probes.Fail(probes.CauseBacklog, fmt.Errorf("cassandra: none of the %d prepared kv rows is written yet: run the load stage first", p.cfg.kv.Rows))
	}
	want := key%2 == 0 && p.kv.isAcked(key/2)
	var value string
	out.Sent = time.Now()
	err := s.Query(p.stmts.kvRead, p.kvPK(key), strconv.FormatInt(key, 10)).Consistency(p.cl[OpRead]).ScanContext(ctx, &value)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		p.noteResult(s, nil)
		if !want {
			return nil
		}
		return p.missed(probes.CauseNotFound, fmt.Errorf("cassandra %s: kv row %d of %s.kv, acknowledged, is gone at %s", p.hostList, key, p.cfg.Keyspace, p.cl[OpRead]),
			func(cl gocql.Consistency) (bool, error) { return p.kvIntact(ctx, s, key, cl) })
	case err != nil:
		return p.opErr(s, OpRead, err)
	}
	p.noteResult(s, nil)
	out.BytesReceived = int64(len(value))
	if value != strconv.FormatInt(key, 10) || key%2 == 1 {
		return probes.Fail(probes.CauseMismatch, fmt.Errorf("cassandra %s: kv row %d of %s.kv holds %q (written: %v)", p.hostList, key, p.cfg.Keyspace, value, key%2 == 0))
	}
	return nil
}

// kvPick is the key a read asks for; false when recycle mode has no written key.
func (p *Probe) kvPick() (int64, bool) {
	rows := int64(p.cfg.kv.Rows)
	if !p.cfg.kv.Recycle {
		return rand.Int64N(2 * rows), true
	}
	for range rows {
		n := (p.kv.cursor.Add(1) - 1) % rows
		if p.kv.isAcked(n) {
			return 2 * n, true
		}
	}
	return 0, false
}

// kvIntact reads key again at cl: true if it holds its value.
func (p *Probe) kvIntact(ctx context.Context, s *gocql.Session, key int64, cl gocql.Consistency) (bool, error) {
	var value string
	err := s.Query(p.stmts.kvRead, p.kvPK(key), strconv.FormatInt(key, 10)).Consistency(cl).ScanContext(ctx, &value)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return value == strconv.FormatInt(key, 10), nil
}

// kvOps are the kv table's ops (Config.Ops).
func (c *Config) kvOps() []probes.OpSpec {
	return append([]probes.OpSpec{
		{Name: OpBatchInsert, Sent: float64(c.kv.Batch * 3 * 36), Help: "write an unlogged batch of rows of random UUIDs (pk, ck, value) to the kv table"},
		{Name: OpInsert, Help: "write the next kv row: key 0, 2, 4, ... stringified into pk, ck and value"},
		{Name: OpRead, Help: "read a kv row of the prepared key space: a written key must hold its value, a key never written must be absent"},
	}, probes.LedgerSpecs()...)
}
