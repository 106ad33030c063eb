package cassandra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// Prepare implements probes.Probe: it connects, then creates the canary
// keyspace and the profile's table when absent. It reads system_schema first
// because Cassandra checks CREATE permission even for IF NOT EXISTS, so a
// role that may only use a pre-created keyspace still works. Reads and
// CREATEs go to one coordinator (ddlHost), and Prepare succeeds only once the
// nodes agree on the table's id (agreement.go): no op writes before.
func (p *Probe) Prepare(ctx context.Context) error {
	s, err := p.session(ctx)
	if err != nil {
		return err
	}
	ddl := ddlHost(s)
	var replication map[string]string
	readKeyspace := func() error {
		return on(s.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, p.cfg.Keyspace), ddl).
			Consistency(gocql.One).ScanContext(ctx, &replication)
	}
	err = readKeyspace()
	var answered gocql.RequestError
	if ddl != nil && err != nil && !errors.Is(err, gocql.ErrNotFound) && !errors.As(err, &answered) && ctx.Err() == nil {
		// The coordinator did not answer (the driver still counts it up):
		// this once, let the driver choose; the id check below still holds.
		p.logger.Debug("the schema coordinator did not answer; letting the driver choose", "host", ddl.ConnectAddress(), "err", err)
		ddl = nil
		err = readKeyspace()
	}
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		if err := p.createKeyspace(ctx, s, ddl); err != nil {
			return err
		}
	case err != nil:
		return p.classify("reading system_schema.keyspaces", err)
	default:
		p.useReplication(replication)
	}
	var ttl int
	err = on(s.Query(`SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, p.cfg.Keyspace, p.table), ddl).
		Consistency(gocql.One).ScanContext(ctx, &ttl)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		if err := p.createTable(ctx, s, ddl); err != nil {
			return err
		}
		// A new table holds none of the rows remembered: forget them.
		p.resetWritten()
		p.forgetLedger()
	case err != nil:
		return p.classify("reading system_schema.tables", err)
	case time.Duration(ttl)*time.Second != p.cfg.TTL:
		p.logger.Warn("canary table's default_time_to_live differs from the configured ttl; every write still carries the configured ttl",
			"table", p.cfg.Keyspace+"."+p.table, "table_ttl", time.Duration(ttl)*time.Second, "ttl", p.cfg.TTL,
			"fix", fmt.Sprintf("ALTER TABLE %s.%s WITH default_time_to_live = %d;", p.cfg.Keyspace, p.table, p.ttlSeconds))
	}
	id, err := p.tableAgreed(ctx, s)
	if err != nil {
		return err
	}
	p.adoptTableID(id)
	return nil
}

// useReplication adopts the replication of an existing keyspace (the
// configured one is only used to create it) for the consistency check.
func (p *Probe) useReplication(m map[string]string) {
	rs, ok := parseReplication(m)
	if !ok {
		p.logger.Warn("cannot model the canary keyspace's replication strategy; assuming the configured replication", "keyspace", p.cfg.Keyspace, "class", m["class"])
		return
	}
	old := p.check.Load()
	if rs.equal(old.replicas) {
		return
	}
	p.setReplicas(rs)
	p.logger.Info("the canary keyspace exists with another replication than configured (the configuration is only used to create it)",
		"keyspace", p.cfg.Keyspace, "replication", rs.String(), "configured", p.cfg.Replication.configured().String())
	if w := p.cfg.weakWarning(rs); w != "" && !old.weak {
		p.logger.Warn(w, "keyspace", p.cfg.Keyspace)
	}
}

func (p *Probe) createKeyspace(ctx context.Context, s *gocql.Session, ddl *gocql.HostInfo) error {
	stmt := p.createKeyspaceCQL()
	err := on(s.Query(stmt), ddl).Consistency(gocql.One).ExecContext(ctx)
	if err == nil {
		p.logger.Info("created the canary keyspace", "keyspace", p.cfg.Keyspace, "replication", p.cfg.Replication.cql())
		return nil
	}
	if isUnauthorized(err) {
		return probes.Fail(probes.CauseSetup, fmt.Errorf(
			"cassandra %s: role %s may not create the canary keyspace %s (missing grant: CREATE ON ALL KEYSPACES). "+
				"Either GRANT CREATE ON ALL KEYSPACES TO %s; or have an administrator pre-create it: %s GRANT CREATE, SELECT, MODIFY ON KEYSPACE %s TO %s; (server said: %v)",
			p.hostList, p.role(), p.cfg.Keyspace, p.role(), stmt+";", p.cfg.Keyspace, p.role(), err))
	}
	return p.classify("creating keyspace "+p.cfg.Keyspace, err)
}

func (p *Probe) createTable(ctx context.Context, s *gocql.Session, ddl *gocql.HostInfo) error {
	stmt := p.createTableCQL()
	err := on(s.Query(stmt), ddl).Consistency(gocql.One).ExecContext(ctx)
	if err == nil {
		p.logger.Info("created the canary table", "table", p.cfg.Keyspace+"."+p.table, "ttl", p.cfg.TTL)
		return nil
	}
	if isUnauthorized(err) {
		return probes.Fail(probes.CauseSetup, fmt.Errorf(
			"cassandra %s: role %s may not create table %s.%s (missing grant: CREATE ON KEYSPACE %s). "+
				"Either GRANT CREATE ON KEYSPACE %s TO %s; or have an administrator pre-create it: %s GRANT SELECT, MODIFY ON KEYSPACE %s TO %s; (server said: %v)",
			p.hostList, p.role(), p.cfg.Keyspace, p.table, p.cfg.Keyspace, p.cfg.Keyspace, p.role(), stmt+";", p.cfg.Keyspace, p.role(), err))
	}
	return p.classify("creating table "+p.cfg.Keyspace+"."+p.table, err)
}

func (p *Probe) createKeyspaceCQL() string {
	return fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s", p.cfg.Keyspace, p.cfg.Replication.cql())
}

func (p *Probe) createTableCQL() string {
	cols := "key uuid PRIMARY KEY, a blob, b blob"
	if p.cfg.Profile == profileKV {
		cols = "pk text, ck text, value text, PRIMARY KEY (pk, ck)" // Rama's test.test
	}
	if p.cfg.Profile == ProfileYCSBA {
		var b strings.Builder
		b.WriteString("y_id varchar PRIMARY KEY")
		for i := range ycsbFields {
			fmt.Fprintf(&b, ", field%d varchar", i)
		}
		cols = b.String()
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (%s) WITH default_time_to_live = %d", p.cfg.Keyspace, p.table, cols, p.ttlSeconds)
}

// role names the canary's role in grant hints.
func (p *Probe) role() string {
	if p.cfg.Username == "" {
		return "<canary role>"
	}
	return p.cfg.Username
}

func isUnauthorized(err error) bool {
	var re gocql.RequestError
	return errors.As(err, &re) && re.Code() == gocql.ErrCodeUnauthorized
}
