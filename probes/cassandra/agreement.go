package cassandra

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// Concurrent CREATE TABLE IF NOT EXISTS of one table through several
// coordinators gives it one id per coordinator (Cassandra before
// transactional metadata: each node checks only its own schema). The schemas
// then converge on one id, and every node that held another drops that table
// and its rows ("tables=Diff{created=[t], dropped=[t]}" in system.log): rows
// written under a losing id read not_found. So Prepare sends its DDL to one
// coordinator (schema changes on one node are serialised), and lets no op run
// until every node it can ask reports one id for the table and the nodes'
// schema versions agree (tableAgreed): from then on no node can create
// another id, since each already has the table.

// schemaState is what Prepare learnt of the canary table; only Prepare
// touches it (the engine runs one Prepare at a time).
type schemaState struct {
	tableID gocql.UUID // the id every node agreed on at the last Prepare
	// versionsSplitSince is when Prepare first saw the table's id agreed but
	// the schema versions of the nodes not (zero: not seen).
	versionsSplitSince time.Time
}

// versionSplitLimit bounds how long a schema version disagreement that does
// not concern the table's id (a node the driver cannot tell is down, another
// keyspace's DDL) holds the canary back: past it, Prepare goes on and warns.
const versionSplitLimit = 30 * time.Second

// nodeView is what one node says of the schema.
type nodeView struct {
	addr    string // as the driver reaches it
	hostID  string
	err     error      // the node could not be asked
	found   bool       // the node has the table
	id      gocql.UUID // the table's id there
	version string     // the node's schema_version
	peers   []peerVersion
}

// peerVersion is a peer's schema version as a node's gossip knows it.
type peerVersion struct {
	hostID, addr, version string
}

// verdict is what the node views say of the table.
type verdict struct {
	agreed bool       // one id everywhere asked, and one schema version
	id     gocql.UUID // the agreed id
	// idSplit: nodes report different ids, or some have no table yet;
	// versionSplit: ids agree but schema versions do not.
	idSplit, versionSplit bool
	detail                string // who says what, for the operator
}

// judge decides from the views of the nodes asked; down lists the host ids
// the driver knows are down (their gossiped schema version is stale).
func judge(views []nodeView, down map[string]bool) verdict {
	var answered []nodeView
	for _, v := range views {
		if v.err == nil {
			answered = append(answered, v)
		}
	}
	if len(answered) == 0 {
		return verdict{detail: "no node answered"}
	}
	ids := map[gocql.UUID][]string{}
	var missing []string
	for _, v := range answered {
		if !v.found {
			missing = append(missing, v.addr)
			continue
		}
		ids[v.id] = append(ids[v.id], v.addr)
	}
	if len(ids) > 1 || len(missing) > 0 {
		var parts []string
		for id, addrs := range ids {
			parts = append(parts, fmt.Sprintf("%s on %s", id, strings.Join(addrs, ", ")))
		}
		sort.Strings(parts)
		if len(missing) > 0 {
			parts = append(parts, "no such table yet on "+strings.Join(missing, ", "))
		}
		return verdict{idSplit: true, detail: fmt.Sprintf("%d table ids: %s", len(ids), strings.Join(parts, "; "))}
	}
	var id gocql.UUID
	for k := range ids {
		id = k
	}
	// Each node's gossip view of its peers' schema versions covers the nodes
	// the driver cannot ask (pin_hosts): a version equal to the node's own
	// means that peer has had this schema, so it can no longer create the
	// table under another id.
	var split []string
	for _, v := range answered {
		for _, pv := range v.peers {
			if pv.version == "" || pv.version == v.version || down[pv.hostID] {
				continue
			}
			split = append(split, fmt.Sprintf("%s says schema version %s, its peer %s (host id %s) %s", v.addr, v.version, pv.addr, pv.hostID, pv.version))
		}
	}
	for _, v := range answered[1:] {
		if v.version != answered[0].version {
			split = append(split, fmt.Sprintf("%s says schema version %s, %s %s", answered[0].addr, answered[0].version, v.addr, v.version))
		}
	}
	if len(split) > 0 {
		return verdict{id: id, versionSplit: true, detail: strings.Join(split, "; ")}
	}
	return verdict{agreed: true, id: id}
}

// ddlHost is the coordinator of Prepare's schema statements: the up node
// with the lowest host id, the same for every dbcanary instance that sees the
// same ring, so that their CREATEs are serialised on one node. nil: let the
// driver choose (no host known up).
func ddlHost(s *gocql.Session) *gocql.HostInfo {
	var best *gocql.HostInfo
	for _, h := range s.GetHosts() {
		if h.IsUp() && h.HostID() != "" && (best == nil || h.HostID() < best.HostID()) {
			best = h
		}
	}
	return best
}

// on pins q to h (nil: the driver's choice).
func on(q *gocql.Query, h *gocql.HostInfo) *gocql.Query {
	if h != nil {
		q.SetHostID(h.HostID())
	}
	return q
}

// views asks every up node the driver may use what it has of the table.
func (p *Probe) views(ctx context.Context, s *gocql.Session) ([]nodeView, map[string]bool) {
	down := map[string]bool{}
	var hosts []*gocql.HostInfo
	for _, h := range s.GetHosts() {
		switch {
		case !h.IsUp():
			down[h.HostID()] = true
		case h.HostID() != "":
			hosts = append(hosts, h)
		}
	}
	out := make([]nodeView, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { out[i] = p.view(ctx, s, h) })
	}
	wg.Wait()
	return out, down
}

func (p *Probe) view(ctx context.Context, s *gocql.Session, h *gocql.HostInfo) nodeView {
	v := nodeView{addr: h.ConnectAddress().String(), hostID: h.HostID()}
	err := on(s.Query(`SELECT id FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, p.cfg.Keyspace, p.table), h).
		Consistency(gocql.One).ScanContext(ctx, &v.id)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
	case err != nil:
		v.err = err
		return v
	default:
		v.found = true
	}
	var version gocql.UUID
	if v.err = on(s.Query(`SELECT schema_version FROM system.local WHERE key = 'local'`), h).
		Consistency(gocql.One).ScanContext(ctx, &version); v.err != nil {
		return v
	}
	v.version = version.String()
	iter := on(s.Query(`SELECT host_id, peer, schema_version FROM system.peers`), h).Consistency(gocql.One).IterContext(ctx)
	var (
		hostID, pv gocql.UUID
		peer       string
	)
	for iter.Scan(&hostID, &peer, &pv) {
		pr := peerVersion{hostID: hostID.String(), addr: peer}
		if pv != (gocql.UUID{}) {
			pr.version = pv.String()
		}
		v.peers = append(v.peers, pr)
	}
	v.err = iter.Close()
	return v
}

// tableAgreed waits, with backoff, until the nodes agree on one id for the
// canary table, and returns it. It gives up in time for its error to reach
// the engine before ctx ends (an op's deadline turns any other error into a
// timeout): a table id disagreement is then cause setup, which holds every op
// back and pages as a misconfiguration after its "for", never as data loss.
func (p *Probe) tableAgreed(ctx context.Context, s *gocql.Session) (gocql.UUID, error) {
	stop := time.Now().Add(versionSplitLimit)
	if d, ok := ctx.Deadline(); ok {
		stop = d.Add(-min(time.Until(d)/5, time.Second))
	}
	wait := 100 * time.Millisecond
	t0, first := time.Now(), ""
	for {
		views, down := p.views(ctx, s)
		v := judge(views, down)
		if v.agreed {
			p.schema.versionsSplitSince = time.Time{}
			if first != "" {
				p.logger.Info("held the canary back until the nodes agreed on the canary table's id",
					"table", p.cfg.Keyspace+"."+p.table, "id", v.id, "waited", time.Since(t0).Round(time.Millisecond), "first_seen", first)
			}
			return v.id, nil
		}
		if first == "" {
			first = v.detail
		}
		now := time.Now()
		if v.versionSplit {
			if p.schema.versionsSplitSince.IsZero() {
				p.schema.versionsSplitSince = now
			}
			if now.Sub(p.schema.versionsSplitSince) >= versionSplitLimit {
				p.logger.Warn("the canary table has one id on every node asked, but the nodes' schema versions still disagree; going on",
					"table", p.cfg.Keyspace+"."+p.table, "id", v.id, "for", now.Sub(p.schema.versionsSplitSince).Round(time.Second), "detail", v.detail,
					"check", "nodetool describecluster")
				p.schema.versionsSplitSince = time.Time{}
				return v.id, nil
			}
		}
		if now.Add(wait).After(stop) {
			return gocql.UUID{}, p.disagreement(v, views)
		}
		select {
		case <-ctx.Done():
			return gocql.UUID{}, p.disagreement(v, views)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// disagreement is the operator's error for a table the nodes do not agree on.
func (p *Probe) disagreement(v verdict, views []nodeView) error {
	table := p.cfg.Keyspace + "." + p.table
	switch {
	case v.idSplit:
		return probes.Fail(probes.CauseSetup, fmt.Errorf(
			"cassandra %s: schema disagreement: the canary table %s has %s (created at once through several coordinators?). "+
				"Writes are held back until every node reports one id: rows written under an id that loses are dropped with it. "+
				"It usually settles within seconds; if it persists, run nodetool describecluster (one schema version expected), "+
				"then nodetool resetlocalschema on the nodes with the other id, or DROP TABLE %s; and let dbcanary create it again",
			p.hostList, table, v.detail, table))
	case v.versionSplit:
		return probes.Fail(probes.CauseSetup, fmt.Errorf(
			"cassandra %s: waiting for schema agreement on the canary table %s (id %s): %s. Writes are held back until the nodes agree (at most %s); "+
				"if it persists, nodetool describecluster names the nodes out of step",
			p.hostList, table, v.id, v.detail, versionSplitLimit))
	}
	// No node answered: the first error says why (timeout, refused, ...).
	var errs []error
	for _, nv := range views {
		if nv.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nv.addr, nv.err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, gocql.ErrNoConnections)
	}
	return p.classify("checking the canary table "+table+" on every node", errs[0])
}

// adoptTableID records the table's agreed id; a different one than at the
// last Prepare means the table was replaced (dropped and created again, or a
// schema disagreement settled on another id than the one our rows went to):
// the rows remembered are not in it, so they are forgotten, never reported lost.
func (p *Probe) adoptTableID(id gocql.UUID) {
	old := p.schema.tableID
	p.schema.tableID = id
	if old == (gocql.UUID{}) || old == id {
		return
	}
	p.logger.Warn("the canary table's id changed since the last check: forgetting the rows written into the old one",
		"table", p.cfg.Keyspace+"."+p.table, "old_id", old, "id", id)
	p.resetWritten()
	p.forgetLedger()
}
