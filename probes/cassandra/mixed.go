package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// written is a mixed_workload row this instance inserted; its blobs are
// windows of the payload pool chosen by the key's two halves.
type written struct {
	key        gocql.UUID
	aLen, bLen int32
	at         time.Time
}

// keyRing holds the most recent keys this instance wrote: reads go only there.
type keyRing struct {
	mu      sync.Mutex
	entries []written
	next, n int
}

func newKeyRing(size int) *keyRing { return &keyRing{entries: make([]written, size)} }

func (r *keyRing) add(w written) {
	r.mu.Lock()
	r.entries[r.next] = w
	r.next = (r.next + 1) % len(r.entries)
	r.n = min(r.n+1, len(r.entries))
	r.mu.Unlock()
}

func (r *keyRing) reset() {
	r.mu.Lock()
	r.next, r.n = 0, 0
	r.mu.Unlock()
}

// pick returns a random key written between minAge and maxAge ago or, when
// none is that old yet, the youngest key under maxAge.
func (r *keyRing) pick(now time.Time, minAge, maxAge time.Duration) (written, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return written{}, false
	}
	start := rand.IntN(r.n)
	for i := range r.n {
		w := r.entries[(start+i)%r.n]
		if age := now.Sub(w.at); age >= minAge && age < maxAge {
			return w, true
		}
	}
	w := r.entries[(r.next-1+len(r.entries))%len(r.entries)]
	return w, now.Sub(w.at) < maxAge
}

func (p *Probe) blobs(w written) (a, b []byte) {
	return p.pool.window(uint64FromKey(w.key[:8]), int(w.aLen)), p.pool.window(uint64FromKey(w.key[8:]), int(w.bLen))
}

func uint64FromKey(b []byte) uint64 {
	var x uint64
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	return x
}

func (p *Probe) insert(ctx context.Context, s *gocql.Session, out *probes.Outcome) (written, error) {
	key, err := gocql.RandomUUID()
	if err != nil {
		return written{}, probes.Fail(probes.CauseOther, fmt.Errorf("cassandra: random key: %w", err))
	}
	mc := p.cfg.MixedWorkload
	w := written{
		key:  key,
		aLen: int32(mc.ASize.Min + rand.IntN(mc.ASize.Max-mc.ASize.Min+1)),
		bLen: int32(mc.BSize.Min + rand.IntN(mc.BSize.Max-mc.BSize.Min+1)),
	}
	a, b := p.blobs(w)
	out.Sent = time.Now()
	err = s.Query(p.stmts.insert, key, a, b, p.ttlSeconds).Consistency(p.cl[OpInsert]).ExecContext(ctx)
	if err != nil {
		return written{}, p.opErr(s, OpInsert, err)
	}
	p.noteResult(s, nil)
	w.at = time.Now()
	p.ring.add(w)
	out.BytesSent += int64(len(a) + len(b))
	return w, nil
}

func (p *Probe) read(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	now := time.Now()
	w, ok := p.ring.pick(now, p.cfg.ReadMinAge, p.maxReadAge)
	if !ok {
		// Nothing of ours is readable yet (just started, or inserts are off):
		// write a row first; service time starts at the read.
		var err error
		if w, err = p.insert(ctx, s, out); err != nil {
			return err
		}
		out.BytesSent = 0
	}
	var key gocql.UUID
	var a, b []byte
	out.Sent = time.Now()
	err := s.Query(p.stmts.read, w.key).Consistency(p.cl[OpRead]).ScanContext(ctx, &key, &a, &b)
	if errors.Is(err, gocql.ErrNotFound) {
		p.noteResult(s, nil)
		return p.missed(probes.CauseNotFound, fmt.Errorf("cassandra %s: row %s of %s.%s, written %s ago with a TTL of %s, is gone at %s",
			p.hostList, w.key, p.cfg.Keyspace, p.table, time.Since(w.at).Round(time.Millisecond), p.cfg.TTL, p.cl[OpRead]),
			func(cl gocql.Consistency) (bool, error) { return p.rowIntact(ctx, s, w, cl) })
	}
	if err != nil {
		return p.opErr(s, OpRead, err)
	}
	p.noteResult(s, nil)
	out.BytesReceived = int64(len(a) + len(b))
	// Keys are random and written once: a replica that missed the write has
	// no row, never another one, so different bytes are a mismatch whatever
	// the consistency levels.
	if err := p.sameBlobs(w, a, b); err != nil {
		return probes.Fail(probes.CauseMismatch, fmt.Errorf("cassandra %s: row %s of %s.%s: %w", p.hostList, w.key, p.cfg.Keyspace, p.table, err))
	}
	return nil
}

func (p *Probe) sameBlobs(w written, a, b []byte) error {
	wantA, wantB := p.blobs(w)
	return errors.Join(compare("blob a", a, wantA), compare("blob b", b, wantB))
}

// rowIntact reads a row again at cl: true if it is there as written.
func (p *Probe) rowIntact(ctx context.Context, s *gocql.Session, w written, cl gocql.Consistency) (bool, error) {
	var key gocql.UUID
	var a, b []byte
	err := s.Query(p.stmts.read, w.key).Consistency(cl).ScanContext(ctx, &key, &a, &b)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return p.sameBlobs(w, a, b) == nil, nil
}

// readMiss reads a random key nobody wrote: it must come back empty.
func (p *Probe) readMiss(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	key, err := gocql.RandomUUID()
	if err != nil {
		return probes.Fail(probes.CauseOther, fmt.Errorf("cassandra: random key: %w", err))
	}
	var got gocql.UUID
	var a, b []byte
	out.Sent = time.Now()
	err = s.Query(p.stmts.read, key).Consistency(p.cl[OpReadMiss]).ScanContext(ctx, &got, &a, &b)
	if errors.Is(err, gocql.ErrNotFound) {
		p.noteResult(s, nil)
		return nil
	}
	if err != nil {
		return p.opErr(s, OpReadMiss, err)
	}
	out.BytesReceived = int64(len(a) + len(b))
	return probes.Fail(probes.CauseMismatch, fmt.Errorf("cassandra %s: random key %s, never written, returned a row from %s.%s", p.hostList, key, p.cfg.Keyspace, p.table))
}
