//go:build integration

package cassandra_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/cassandra"
	"github.com/dbcanary/dbcanary/test/stack"
)

var env stack.Env

func TestMain(m *testing.M) {
	env = stack.Must("cassandra")
	stack.Exit(m.Run())
}

func host() string { return env["DBCANARY_TEST_CASSANDRA_HOST"] }
func port() int    { n, _ := strconv.Atoi(env["DBCANARY_TEST_CASSANDRA_PORT"]); return n }

// admin opens a superuser session for setting up and checking behind the canary's back.
func admin(t testing.TB) *gocql.Session {
	t.Helper()
	pw, err := os.ReadFile(env.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	cl := gocql.NewCluster(host())
	cl.Port = port()
	cl.Consistency = gocql.One
	cl.Timeout = 20 * time.Second
	cl.ConnectTimeout = 20 * time.Second
	cl.Authenticator = gocql.PasswordAuthenticator{Username: env.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), Password: string(pw)}
	var s *gocql.Session
	enginetest.WaitFor(t, 60*time.Second, "an admin session", func() bool {
		s, err = cl.CreateSession()
		return err == nil
	})
	t.Cleanup(s.Close)
	return s
}

func mustExec(t testing.TB, s *gocql.Session, stmt string, args ...any) {
	t.Helper()
	if err := s.Query(stmt, args...).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// section is a cassandra: block for the superuser; extra lines are appended.
func section(t testing.TB, keyspace, extra string) string {
	return fmt.Sprintf(`hosts: [%q]
port: %d
username: %s
password_file: %s
local_dc: %s
keyspace: %s
replication: {class: SimpleStrategy, replication_factor: 1}
%s`, host(), port(), env.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), env.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"),
		env.Get(t, "DBCANARY_TEST_CASSANDRA_DC"), keyspace, extra)
}

// engineConfig is a whole dbcanary config with one cassandra target.
func engineConfig(instance, target, ops, cass string) string {
	return fmt.Sprintf(`global:
  instance_id: %s
  timeout: 10s
targets:
  - name: %s
    backend: cassandra
    max_in_flight: 4
    ops:
%s
    cassandra:
%s
`, instance, target, enginetest.Indent(ops, 6), enginetest.Indent(cass, 6))
}

// newProbe builds a probe directly from a section, for step-by-step tests.
func newProbe(t testing.TB, instance, cass string) *cassandra.Probe {
	t.Helper()
	cfg := enginetest.Parse(t, engineConfig(instance, "direct", "read: {rate: 1}", cass))
	p, err := cassandra.New(probes.Target{Name: "direct", InstanceID: instance, Config: cfg.Targets[0].Probe, Logger: enginetest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func run(t testing.TB, p *cassandra.Probe, op string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out probes.Outcome
	out.Reset(time.Now())
	return p.Run(ctx, op, &out)
}

func prepare(t testing.TB, p *cassandra.Probe) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return p.Prepare(ctx)
}

// schema lists every keyspace and table, to prove nothing is created outside the canary keyspace.
func schema(t testing.TB, s *gocql.Session) []string {
	t.Helper()
	var out []string
	iter := s.Query(`SELECT keyspace_name, table_name FROM system_schema.tables`).Iter()
	var ks, tb string
	for iter.Scan(&ks, &tb) {
		out = append(out, ks+"."+tb)
	}
	iter2 := s.Query(`SELECT keyspace_name FROM system_schema.keyspaces`).Iter()
	for iter2.Scan(&ks) {
		out = append(out, ks)
	}
	if err := errJoin(iter.Close(), iter2.Close()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func errJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func okCount(t testing.TB, h *enginetest.Harness, target, op string) uint64 {
	return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"target": target, "op": op, "result": "ok"})
}

func failures(t testing.TB, h *enginetest.Harness, target, cause string) float64 {
	return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": target, "cause": cause})
}
