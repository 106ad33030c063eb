package cassandra

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// The durability ledger's rows live in the profile's own table (no other
// schema, no other grant), under keys the workload never reads: a random
// uuid (mixed_workload) or ledger-<instance>-<hex> (ycsb_a). Each carries the
// table TTL and expires by itself; the ledger forgets an entry before the
// TTL can expire its row, so a late check (dbcanary was down) never reports
// an expired row as lost.
const ledgerSize = 1024 // bytes of random hex text per row

// ledgerLimit is the longest ledger age the TTL leaves a row readable: the
// ttl less a tenth for clock skew (as for reads, maxReadAge).
func (c *Config) ledgerLimit() (time.Duration, string) {
	limit := c.TTL - c.TTL/10
	return limit, fmt.Sprintf("the table TTL (ttl: %s) expires canary rows, and the ledger reads a row back only until %s (the ttl less a tenth for clock skew)",
		probes.AgeLabel(c.TTL), probes.AgeLabel(limit))
}

// ledgerForgetAfter is the age past which an entry is forgotten unchecked:
// its row may have expired. It leaves a check at the last age (at most
// ledgerLimit) a twentieth of the ttl to run.
func (c *Config) ledgerForgetAfter() time.Duration { return c.TTL - c.TTL/20 }

// ledgerAges are the configured ages or, when none are, the defaults that the
// TTL allows, the last one cut to the limit (with the default 1h ttl: 1m,
// 10m, 54m).
func (c *Config) ledgerAges() []time.Duration {
	if len(c.Ledger.Ages) > 0 {
		return c.Ledger.EffectiveAges()
	}
	limit, _ := c.ledgerLimit()
	var out []time.Duration
	for _, a := range probes.DefaultLedgerAges {
		if a <= limit {
			out = append(out, a)
			continue
		}
		cut := limit.Truncate(time.Minute)
		if cut < time.Minute {
			cut = limit.Truncate(time.Second)
		}
		if len(out) == 0 || cut > out[len(out)-1] {
			out = append(out, cut)
		}
		break
	}
	return out
}

// validateLedger checks the ledger block against the TTL.
func (c *Config) validateLedger() []error {
	lc := c.Ledger
	lc.Ages = c.ledgerAges()
	limit, why := c.ledgerLimit()
	// Validate rejects an age >= its limit; the limit itself is readable.
	return lc.Validate(limit+time.Nanosecond, why)
}

// ledgerLevels are the ledger's write and read consistency: consistency.ledger_write
// and consistency.ledger_check, or by default those of the profile's write op and read.
func (c *Config) ledgerLevels() (w, r gocql.Consistency) {
	w, r = c.consistency(c.writeOp()), c.consistency(OpRead)
	if _, ok := c.Consistency[probes.OpLedgerWrite]; ok {
		w = c.consistency(probes.OpLedgerWrite)
	}
	if _, ok := c.Consistency[probes.OpLedgerCheck]; ok {
		r = c.consistency(probes.OpLedgerCheck)
	}
	return w, r
}

// ledgerStatements sets the ledger's levels and statements (the ledger
// itself comes in probes.Target.Ledger).
func (p *Probe) ledgerStatements() {
	p.ledgerW, p.ledgerR = p.cfg.ledgerLevels()
	if p.cfg.Profile == ProfileYCSBA {
		p.stmts.ledgerWrite = fmt.Sprintf("INSERT INTO %s.usertable (y_id, field0) VALUES (?, ?) USING TTL ?", p.cfg.Keyspace)
		p.stmts.ledgerRead = fmt.Sprintf("SELECT field0 FROM %s.usertable WHERE y_id = ?", p.cfg.Keyspace)
	} else {
		p.stmts.ledgerWrite = fmt.Sprintf("INSERT INTO %s.mixed_workload (key, a) VALUES (?, ?) USING TTL ?", p.cfg.Keyspace)
		p.stmts.ledgerRead = fmt.Sprintf("SELECT a FROM %s.mixed_workload WHERE key = ?", p.cfg.Keyspace)
	}
}

// Ledger returns the probe's durability ledger.
func (p *Probe) Ledger() *probes.Ledger { return p.ledger }

// ledgerKey is the row key of a ledger entry, as the statements bind it.
func (p *Probe) ledgerKey(key string) (any, error) {
	if p.cfg.Profile == ProfileYCSBA {
		return key, nil
	}
	return gocql.ParseUUID(key)
}

// ledgerWrite inserts one row of random text at the ledger's write level and,
// once acknowledged, records its key and checksum.
func (p *Probe) ledgerWrite(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	raw := make([]byte, ledgerSize/2)
	_, _ = rand.Read(raw)
	body := []byte(hex.EncodeToString(raw))
	var key string
	var bind any
	if p.cfg.Profile == ProfileYCSBA {
		var id [8]byte
		_, _ = rand.Read(id[:])
		key = fmt.Sprintf("ledger-%s-%x", p.instance, id)
		bind = key
	} else {
		u, err := gocql.RandomUUID()
		if err != nil {
			return probes.Fail(probes.CauseOther, fmt.Errorf("cassandra: random key: %w", err))
		}
		key, bind = u.String(), u
	}
	var val any = body
	if p.cfg.Profile == ProfileYCSBA {
		val = string(body)
	}
	out.Sent = time.Now()
	if err := s.Query(p.stmts.ledgerWrite, bind, val, p.ttlSeconds).Consistency(p.ledgerW).ExecContext(ctx); err != nil {
		return p.opErr(s, probes.OpLedgerWrite, err)
	}
	acked := time.Now()
	p.noteResult(s, nil)
	out.BytesSent += int64(len(body))
	if err := p.ledger.Add(probes.LedgerEntry{Key: key, Where: p.cfg.Keyspace + "." + p.table, Sum: probes.LedgerSum(body), Size: int64(len(body)),
		Acked: acked, Setting: "INSERT at " + p.ledgerW.String()}); err != nil {
		p.logger.Warn("durability ledger: cannot save the file; the write is still checked while this process runs", "err", err)
	}
	return nil
}

// ledgerCheck reads back, at the ledger's read level, the rows that reached
// a check age. With levels that may miss a write (R + W <= RF), a row
// missing or different is read again at a level that overlaps the write
// before it counts: a replica the write had not reached is not a loss.
func (p *Probe) ledgerCheck(ctx context.Context, s *gocql.Session, out *probes.Outcome) error {
	out.Sent = time.Now()
	// Rows the TTL may have expired (a check late because dbcanary was down)
	// are forgotten, never reported lost.
	after := p.cfg.ledgerForgetAfter()
	if n, err := p.ledger.Forget(time.Now().Add(-after)); n > 0 {
		p.logger.Info("durability ledger: forgot entries too close to their TTL to read back (dbcanary was down past their check)", "entries", n, "older_than", after, "err", err)
	}
	rs := p.check.Load().replicas
	weak := !rs.overlap(p.ledgerR, p.ledgerW, p.cfg.LocalDC)
	confirm, canConfirm := rs.confirmLevel(p.ledgerW, p.cfg.LocalDC)
	readAt := func(ctx context.Context, d probes.LedgerDue, cl gocql.Consistency) (probes.LedgerResult, error) {
		key, err := p.ledgerKey(d.Key)
		if err != nil {
			return "", probes.Fail(probes.CauseOther, fmt.Errorf("cassandra: ledger key %q: %w", d.Key, err))
		}
		var got []byte
		err = s.Query(p.stmts.ledgerRead, key).Consistency(cl).ScanContext(ctx, &got)
		switch {
		case errors.Is(err, gocql.ErrNotFound):
			return probes.LedgerMissing, nil
		case err != nil:
			return "", p.opErr(s, probes.OpLedgerCheck, err)
		}
		p.noteResult(s, nil)
		out.BytesReceived += int64(len(got))
		if len(got) == 0 { // the row is there without the ledger's column (overwritten, or a tombstone)
			return probes.LedgerMissing, nil
		}
		if probes.LedgerSum(got) != d.Sum {
			return probes.LedgerCorrupted, nil
		}
		return probes.LedgerIntact, nil
	}
	read := func(ctx context.Context, d probes.LedgerDue) (probes.LedgerResult, error) {
		r, err := readAt(ctx, d, p.ledgerR)
		if err != nil || r == probes.LedgerIntact || !weak || !canConfirm {
			return r, err
		}
		return readAt(ctx, d, confirm)
	}
	return p.ledger.Check(ctx, read, nil) // rows expire by their TTL: deleting would only add tombstones
}

// forgetLedger drops every entry: the canary table was created anew, so
// none of the rows the ledger names can be there.
func (p *Probe) forgetLedger() {
	if p.ledger == nil {
		return // a probe built without the engine (tests) keeps none
	}
	if n, err := p.ledger.Forget(time.Now().Add(time.Hour)); n > 0 {
		p.logger.Warn("durability ledger: the canary table was created anew, forgetting the writes acknowledged into the old one", "entries", n, "err", err)
	}
}

// LedgerSettings implements probes.LedgerConfigured: the ages and bound the target's ledger is opened with.
func (c *Config) LedgerSettings() ([]time.Duration, int) { return c.ledgerAges(), c.Ledger.MaxEntries }
