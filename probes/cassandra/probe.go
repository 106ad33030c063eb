package cassandra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// Probe is the Cassandra canary for one target.
type Probe struct {
	cfg        Config
	target     string
	instance   string
	hostList   string // contact points, for messages
	certs      probes.CertObserver
	logger     *slog.Logger
	table      string
	ttlSeconds int
	maxReadAge time.Duration // rows older than this may expire under the read
	cl         map[string]gocql.Consistency
	check      atomic.Pointer[readCheck] // how a read that missed a write is classified
	stmts      statements
	pool       payloadPool
	ring       *keyRing // mixed_workload
	kv         *kvState // rama_kv (bench only)
	recs       *records // ycsb_a
	ledger     *probes.Ledger
	ledgerW    gocql.Consistency // the ledger's write level
	ledgerR    gocql.Consistency // the ledger's read level
	schema     schemaState       // the canary table's agreed id (agreement.go)

	mu           sync.Mutex // guards the session state below
	sess         *gocql.Session
	redial       probes.Backoff // see session
	noHostsSince time.Time
	filter       gocql.HostFilter // pin_hosts' filter of the session being built
	conns        *connTrack       // its dialer's connections

	live atomic.Pointer[liveSession] // p.sess for NodeStates (nodes.go)
}

type statements struct {
	insert, read         string
	ycsbInsert, ycsbRead string
	ycsbUpdate           [ycsbFields]string
	kvInsert, kvRead     string
	ledgerWrite          string
	ledgerRead           string
}

// New builds the probe; it does no I/O.
func New(t probes.Target) (*Probe, error) {
	cfg := *t.Config.(*Config)
	p := &Probe{
		cfg:        cfg,
		target:     t.Name,
		instance:   t.InstanceID,
		hostList:   strings.Join(cfg.Hosts, ","),
		redial:     newRedial(),
		certs:      t.Certs,
		ledger:     t.Ledger,
		logger:     t.Logger,
		ttlSeconds: int(cfg.TTL / time.Second),
		// A margin of a tenth of the TTL covers clock skew between us and the nodes.
		maxReadAge: cfg.TTL - cfg.TTL/10,
		cl:         map[string]gocql.Consistency{},
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TLS.InsecureSkipVerify {
		p.logger.Warn("TLS certificate verification is disabled for this target (tls.insecure_skip_verify)")
	}
	for _, op := range cfg.opNames() {
		p.cl[op] = cfg.consistency(op)
	}
	p.setReplicas(cfg.Replication.configured())
	for _, w := range cfg.Warnings() {
		p.logger.Warn(w)
	}
	ks := cfg.Keyspace
	switch cfg.Profile {
	case profileKV:
		p.kvStatements()
	case ProfileYCSBA:
		if p.instance == "" {
			return nil, errors.New("cassandra: the ycsb_a profile needs an instance id (its keys are <instance>-<n>)")
		}
		p.table = "usertable"
		p.pool = newTextPool(cfg.YCSBA.FieldLength)
		p.recs = &records{recs: make([]record, cfg.YCSBA.RecordCount)}
		cols, marks := "y_id", "?"
		for f := range ycsbFields {
			cols += fmt.Sprintf(", field%d", f)
			marks += ", ?"
			p.stmts.ycsbUpdate[f] = fmt.Sprintf("UPDATE %s.usertable USING TTL ? SET field%d = ? WHERE y_id = ?", ks, f)
		}
		p.stmts.ycsbInsert = fmt.Sprintf("INSERT INTO %s.usertable (%s) VALUES (%s) USING TTL ?", ks, cols, marks)
		p.stmts.ycsbRead = fmt.Sprintf("SELECT %s FROM %s.usertable WHERE y_id = ?", strings.TrimPrefix(cols, "y_id, "), ks)
	default:
		p.table = "mixed_workload"
		p.pool = newBinaryPool(max(cfg.MixedWorkload.ASize.Max, cfg.MixedWorkload.BSize.Max))
		p.ring = newKeyRing(cfg.MixedWorkload.RecentKeys)
		p.stmts.insert = fmt.Sprintf("INSERT INTO %s.mixed_workload (key, a, b) VALUES (?, ?, ?) USING TTL ?", ks)
		p.stmts.read = fmt.Sprintf("SELECT * FROM %s.mixed_workload WHERE key = ?", ks)
	}
	p.ledgerStatements()
	return p, nil
}

// Run implements probes.Probe.
func (p *Probe) Run(ctx context.Context, op string, out *probes.Outcome) error {
	s, err := p.session(ctx)
	if err != nil {
		return err
	}
	ctx, coords := probes.WithNodeTrail(ctx)
	if err := p.run(ctx, s, op, out); err != nil {
		return nameCoordinators(err, coords.List(), len(s.GetHosts()))
	}
	return nil
}

func (p *Probe) run(ctx context.Context, s *gocql.Session, op string, out *probes.Outcome) (err error) {
	switch {
	case op == probes.OpLedgerWrite:
		return p.ledgerWrite(ctx, s, out)
	case op == probes.OpLedgerCheck:
		return p.ledgerCheck(ctx, s, out)
	case p.ring != nil && op == OpInsert:
		_, err = p.insert(ctx, s, out)
		return err
	case p.ring != nil && op == OpRead:
		return p.read(ctx, s, out)
	case p.ring != nil && op == OpReadMiss:
		return p.readMiss(ctx, s, out)
	case p.recs != nil && op == OpRead:
		return p.ycsbRead(ctx, s, out)
	case p.recs != nil && op == OpUpdate:
		return p.update(ctx, s, out)
	case p.kv != nil && op == OpBatchInsert:
		return p.batchInsert(ctx, s, out)
	case p.kv != nil && op == OpInsert:
		return p.kvInsert(ctx, s, out)
	case p.kv != nil && op == OpRead:
		return p.kvRead(ctx, s, out)
	}
	return probes.Fail(probes.CauseOther, fmt.Errorf("cassandra: op %q is not part of profile %s", op, p.cfg.Profile))
}

// opErr classifies a failed op, marking a vanished keyspace or table so the
// engine runs Prepare again.
func (p *Probe) opErr(s *gocql.Session, op string, err error) error {
	p.noteResult(s, err)
	if namespaceGone(err) {
		return probes.Fail(probes.CauseNotFound, fmt.Errorf("cassandra %s: %s: canary table %s.%s is gone (%v): %w",
			p.hostList, op, p.cfg.Keyspace, p.table, err, probes.ErrNamespaceGone))
	}
	if isUnauthorized(err) {
		return probes.Fail(probes.CauseSetup, fmt.Errorf("cassandra %s: %s: role %s lacks a grant (needs: GRANT SELECT, MODIFY ON KEYSPACE %s TO %s;): %w",
			p.hostList, op, p.role(), p.cfg.Keyspace, p.role(), err))
	}
	return p.classify(op, err)
}

func (p *Probe) resetWritten() {
	if p.ring != nil {
		p.ring.reset()
	}
	if p.recs != nil {
		p.recs.reset()
	}
	if p.kv != nil {
		p.kv.reset()
	}
}

// readCheck is what the levels in use guarantee for the keyspace's replication.
type readCheck struct {
	replicas   replicaSet
	weak       bool              // reads may miss writes (R + W <= RF)
	confirm    gocql.Consistency // a read level that overlaps the writes, if canConfirm
	canConfirm bool
}

// setReplicas records the keyspace's replication (configured, then as read
// from system_schema) and derives how missed reads are classified.
func (p *Probe) setReplicas(rs replicaSet) {
	w := p.cl[p.cfg.writeOp()]
	c := &readCheck{replicas: rs, weak: !rs.overlap(p.cl[OpRead], w, p.cfg.LocalDC)}
	c.confirm, c.canConfirm = rs.confirmLevel(w, p.cfg.LocalDC)
	p.check.Store(c)
}

// missed classifies a read that did not return what this instance wrote
// (cause not_found or mismatch, described by err). With levels whose reads
// overlap writes that is data loss. With levels that allow a read to miss a
// write, a second read at a level that overlaps the write decides: the row
// intact there, or that read impossible, is cause stale (a replica had not
// received the write: not data loss); the row missing or different there too
// is the original cause.
func (p *Probe) missed(cause probes.Cause, err error, confirm func(gocql.Consistency) (intact bool, cerr error)) error {
	c := p.check.Load()
	if !c.weak {
		return probes.Fail(cause, err)
	}
	levels := fmt.Sprintf("%s at %s and %s at %s with %s (R + W <= RF)", p.cfg.writeOp(), p.cl[p.cfg.writeOp()], OpRead, p.cl[OpRead], c.replicas)
	if !c.canConfirm {
		return probes.Fail(probes.CauseStale, fmt.Errorf("%w; %s allow a read to miss a write, and no read level is guaranteed to see a write at %s: counted as stale, not data loss",
			err, levels, p.cl[p.cfg.writeOp()]))
	}
	intact, cerr := confirm(c.confirm)
	switch {
	case cerr != nil:
		return probes.Fail(probes.CauseStale, fmt.Errorf("%w; %s allow a read to miss a write, and the read at %s that would tell a stale replica from data loss failed (%v): counted as stale, not data loss",
			err, levels, c.confirm, cerr))
	case intact:
		return probes.Fail(probes.CauseStale, fmt.Errorf("%w; a read at %s found it intact: a replica had not received the write, which %s allow (stale, not data loss)",
			err, c.confirm, levels))
	}
	return probes.Fail(cause, fmt.Errorf("%w (confirmed by a read at %s)", err, c.confirm))
}

// Close implements probes.Probe. Nothing is deleted, not even by a one-shot
// run: every row carries the TTL and expires by itself, and deleting would
// only add tombstones.
func (p *Probe) Close() error {
	p.mu.Lock()
	sess := p.sess
	p.sess = nil
	p.live.Store(nil)
	p.redial.Stop(probes.Fail(probes.CauseOther, errors.New("cassandra: probe closed"))) // a closed probe does not reconnect
	p.mu.Unlock()
	if sess == nil {
		return nil
	}
	// gocql's Session.Close can block forever when the control connection is
	// stuck reconnecting (apache/cassandra-gocql-driver #1687, #1752): bound it.
	done := make(chan struct{})
	go func() { sess.Close(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(closeTimeout):
		return fmt.Errorf("cassandra %s: session did not close within %s (driver stuck reconnecting); abandoned", p.hostList, closeTimeout)
	}
}

// closeTimeout bounds Close.
const closeTimeout = 5 * time.Second
