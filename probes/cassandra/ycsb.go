package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// ycsbFields is YCSB's default field count (field0..field9).
const ycsbFields = 10

// record is what this instance knows of one of its usertable rows: each
// field is the text-pool window of (record, field, version), written at at.
type record struct {
	version [ycsbFields]uint32
	at      [ycsbFields]int64 // unix ns; 0: unknown (never written, or a write failed)
	busy    bool              // an op is on it: concurrent ops would race each other
}

// records is this instance's bounded YCSB key space: y_id <instance>-<n>.
type records struct {
	mu   sync.Mutex
	recs []record
}

func (r *records) reset() {
	r.mu.Lock()
	for i := range r.recs {
		if !r.recs[i].busy {
			r.recs[i] = record{}
		}
	}
	r.mu.Unlock()
}

// readable reports whether every field is known and young enough to read.
func (rec *record) readable(now int64, minAge, maxAge time.Duration) (ok, tooYoung bool) {
	var newest int64
	for _, at := range rec.at {
		if at == 0 || time.Duration(now-at) >= maxAge {
			return false, false
		}
		newest = max(newest, at)
	}
	return true, time.Duration(now-newest) < minAge
}

// claim marks a record busy: for a read, a random readable one (a young
// one only if no other is readable); for an update, any free one.
func (r *records) claim(forRead bool, minAge, maxAge time.Duration) (int, record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UnixNano()
	start := rand.IntN(len(r.recs))
	young := -1
	for i := range r.recs {
		n := (start + i) % len(r.recs)
		rec := &r.recs[n]
		if rec.busy {
			continue
		}
		if forRead {
			ok, tooYoung := rec.readable(now, minAge, maxAge)
			if !ok {
				continue
			}
			if tooYoung {
				if young < 0 {
					young = n
				}
				continue
			}
		}
		rec.busy = true
		return n, *rec, true
	}
	if young >= 0 {
		r.recs[young].busy = true
		return young, r.recs[young], true
	}
	return 0, record{}, false
}

// store records a claimed record's new state; it stays busy.
func (r *records) store(n int, rec record) {
	r.mu.Lock()
	rec.busy = true
	r.recs[n] = rec
	r.mu.Unlock()
}

// release ends the op on a claimed record.
func (r *records) release(n int) {
	r.mu.Lock()
	r.recs[n].busy = false
	r.mu.Unlock()
}

func (p *Probe) yid(n int) string { return p.instance + "-" + strconv.Itoa(n) }

func (p *Probe) field(n, f int, version uint32) []byte {
	return p.pool.window(uint64(n)<<36^uint64(f)<<32^uint64(version), p.cfg.YCSBA.FieldLength)
}

// update writes one field of a free record (YCSB's default), or the whole
// row when the record is unknown or its oldest field is past half its TTL,
// so fields never expire one by one under a read.
func (p *Probe) update(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	n, rec, ok := p.recs.claim(false, 0, 0)
	if !ok {
		return probes.Fail(probes.CauseBacklog, fmt.Errorf("cassandra: every one of the %d ycsb records is busy: raise ycsb_a.record_count", p.cfg.YCSBA.RecordCount))
	}
	defer p.recs.release(n)
	_, err := p.writeRecord(ctx, s, n, rec, OpUpdate, out)
	return err
}

// writeRecord writes a record at the update op's consistency level (also
// when a read seeds a record: the read's check assumes the update's level);
// op names the op in errors.
func (p *Probe) writeRecord(ctx context.Context, s *gocql.Session, n int, rec record, op string, out *probes.Outcome) (record, error) {
	now := time.Now().UnixNano()
	full := false
	for _, at := range rec.at {
		if at == 0 || time.Duration(now-at) > p.cfg.TTL/2 {
			full = true
		}
	}
	next := rec
	var q *gocql.Query
	if full {
		args := make([]any, 0, ycsbFields+2)
		args = append(args, p.yid(n))
		for f := range ycsbFields {
			next.version[f]++
			v := p.field(n, f, next.version[f])
			args = append(args, v)
			out.BytesSent += int64(len(v))
		}
		args = append(args, p.ttlSeconds)
		q = s.Query(p.stmts.ycsbInsert, args...)
	} else {
		f := rand.IntN(ycsbFields)
		next.version[f]++
		v := p.field(n, f, next.version[f])
		out.BytesSent += int64(len(v))
		q = s.Query(p.stmts.ycsbUpdate[f], p.ttlSeconds, v, p.yid(n))
	}
	out.Sent = time.Now()
	if err := q.Consistency(p.cl[OpUpdate]).ExecContext(ctx); err != nil {
		// The write may or may not have landed: the record is unknown until rewritten.
		p.recs.store(n, record{})
		return record{}, p.opErr(s, op, err)
	}
	p.noteResult(s, nil)
	done := time.Now().UnixNano()
	for f := range ycsbFields {
		if next.version[f] != rec.version[f] {
			next.at[f] = done
		}
	}
	p.recs.store(n, next)
	return next, nil
}

func (p *Probe) ycsbRead(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	n, rec, ok := p.recs.claim(true, p.cfg.ReadMinAge, p.maxReadAge)
	if !ok {
		// No record of ours is readable yet: write one first; service time starts at the read.
		if n, _, ok = p.recs.claim(false, 0, 0); !ok {
			return probes.Fail(probes.CauseBacklog, fmt.Errorf("cassandra: every one of the %d ycsb records is busy: raise ycsb_a.record_count", p.cfg.YCSBA.RecordCount))
		}
		defer p.recs.release(n)
		var err error
		if rec, err = p.writeRecord(ctx, s, n, record{}, OpRead, out); err != nil {
			return err
		}
		out.BytesSent = 0
	} else {
		defer p.recs.release(n)
	}
	out.Sent = time.Now()
	got, err := p.readRecord(ctx, s, n, p.cl[OpRead])
	intact := func(cl gocql.Consistency) (bool, error) {
		got, err := p.readRecord(ctx, s, n, cl)
		switch {
		case errors.Is(err, gocql.ErrNotFound):
			return false, nil
		case err != nil:
			return false, err
		}
		return p.sameFields(n, rec, got) == nil, nil
	}
	if errors.Is(err, gocql.ErrNotFound) {
		p.noteResult(s, nil)
		return p.missed(probes.CauseNotFound, fmt.Errorf("cassandra %s: row %s of %s.%s, last written %s ago with a TTL of %s, is gone at %s",
			p.hostList, p.yid(n), p.cfg.Keyspace, p.table, time.Duration(time.Now().UnixNano()-newest(rec)).Round(time.Millisecond), p.cfg.TTL, p.cl[OpRead]), intact)
	}
	if err != nil {
		return p.opErr(s, OpRead, err)
	}
	p.noteResult(s, nil)
	for f := range got {
		out.BytesReceived += int64(len(got[f]))
	}
	// Records are updated in place: a replica that missed updates serves
	// older versions of fields (or an earlier run's), which weak levels allow.
	if err := p.sameFields(n, rec, got); err != nil {
		return p.missed(probes.CauseMismatch, fmt.Errorf("cassandra %s: row %s of %s.%s at %s: %w", p.hostList, p.yid(n), p.cfg.Keyspace, p.table, p.cl[OpRead], err), intact)
	}
	return nil
}

// readRecord reads a usertable row's fields at cl.
func (p *Probe) readRecord(ctx context.Context, s *gocql.Session, n int, cl gocql.Consistency) ([ycsbFields][]byte, error) {
	var got [ycsbFields][]byte
	dest := make([]any, ycsbFields)
	for f := range got {
		dest[f] = &got[f]
	}
	err := s.Query(p.stmts.ycsbRead, p.yid(n)).Consistency(cl).ScanContext(ctx, dest...)
	return got, err
}

func (p *Probe) sameFields(n int, rec record, got [ycsbFields][]byte) error {
	var errs []error // allocated only for a mismatch: this runs on every read
	for f := range got {
		want := p.field(n, f, rec.version[f])
		if !bytes.Equal(got[f], want) {
			errs = append(errs, compare("field"+strconv.Itoa(f), got[f], want))
		}
	}
	return errors.Join(errs...)
}

func newest(rec record) int64 {
	var t int64
	for _, at := range rec.at {
		t = max(t, at)
	}
	return t
}
