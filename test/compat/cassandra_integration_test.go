//go:build integration

package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	_ "github.com/dbcanary/dbcanary/probes/cassandra" // the backend the configs name
	"github.com/dbcanary/dbcanary/test/stack"
)

// cassandra41 is the 4.x release the reference deployment's major version is
// tried with (make test runs 5.0.9).
const cassandra41 = "4.1.10"

// cassandraNode is a private Cassandra node: where it listens and its superuser.
type cassandraNode struct {
	host                   string
	port                   int
	user, passwordFile, dc string
}

// startCassandra starts a private node of version with test/stack/cassandra.sh
// (DBCANARY_CASSANDRA_VERSION) on free ports of 127.0.0.1, stopped when the test ends.
func startCassandra(t *testing.T, version string) cassandraNode {
	t.Helper()
	env := startPrivate(t, "cassandra", "cassandra-"+version, "DBCANARY_CASSANDRA_VERSION="+version,
		fmt.Sprintf("DBCANARY_CASSANDRA_PORT=%d", stack.FreePort(t)),
		fmt.Sprintf("DBCANARY_CASSANDRA_STORAGE_PORT=%d", stack.FreePort(t)))
	port, err := strconv.Atoi(env.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"))
	if err != nil {
		t.Fatal(err)
	}
	n := cassandraNode{host: env.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"), port: port,
		user: env.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), passwordFile: env.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"),
		dc: env.Get(t, "DBCANARY_TEST_CASSANDRA_DC")}
	var release string
	if err := n.admin(t).Query(`SELECT release_version FROM system.local`).Scan(&release); err != nil {
		t.Fatal(err)
	}
	if release != version {
		t.Fatalf("the node says release_version %s, want %s", release, version)
	}
	return n
}

// admin is a superuser session, closed when the test ends.
func (n cassandraNode) admin(t *testing.T) *gocql.Session {
	t.Helper()
	pw, err := os.ReadFile(n.passwordFile)
	if err != nil {
		t.Fatal(err)
	}
	cl := gocql.NewCluster(n.host)
	cl.Port, cl.Consistency, cl.Timeout, cl.ConnectTimeout = n.port, gocql.One, 20*time.Second, 20*time.Second
	cl.Authenticator = gocql.PasswordAuthenticator{Username: n.user, Password: string(pw)}
	var s *gocql.Session
	enginetest.WaitFor(t, 60*time.Second, "a superuser session", func() bool {
		s, err = cl.CreateSession()
		return err == nil
	})
	t.Cleanup(s.Close)
	return s
}

// yaml is a one-target config on the node as user (the superuser when ""),
// with a keyspace of replication factor 1; extra lines go into the cassandra: section.
func (n cassandraNode) yaml(target, ops, keyspace, user, passwordFile string, extra ...string) string {
	if user == "" {
		user, passwordFile = n.user, n.passwordFile
	}
	more := ""
	for _, e := range extra {
		more += "\n      " + e
	}
	return fmt.Sprintf(`
global: {instance_id: compat-1, timeout: 20s}
targets:
  - name: %s
    backend: cassandra
    ops: {%s}
    cassandra:
      hosts: [%q]
      port: %d
      local_dc: %s
      username: %s
      password_file: %s
      keyspace: %s
      replication: {class: SimpleStrategy, replication_factor: 1}%s
`, target, ops, n.host, n.port, n.dc, user, passwordFile, keyspace, more)
}

// everyOpRates runs every op of a profile at 1/s and leaves the ledger to its subtest.
const everyOpRates = `"*": {rate: 1}, ledger_write: {rate: 0}, ledger_check: {rate: 0}`

// TestCassandra41 is Apache Cassandra 4.1.10 (cassandra-all from Maven Central)
// on this machine's Java 17, a private node with PasswordAuthenticator and
// CassandraAuthorizer: every op of both workloads, the durability ledger in
// both workloads' tables, the least-privilege role of docs/cassandra.md, and
// the node seen up.
func TestCassandra41(t *testing.T) {
	n := startCassandra(t, cassandra41)
	for _, profile := range []string{"mixed_workload", "ycsb_a"} {
		t.Run("every op "+profile, func(t *testing.T) {
			everyOp(t, n.yaml("c41-"+profile, everyOpRates, "dbcanary_c41", "", "", "profile: "+profile), 3, 3*time.Minute)
		})
		t.Run("ledger "+profile, func(t *testing.T) {
			target := "c41-ledger-" + strings.ReplaceAll(profile, "_", "-")
			ledgerRow(t, n.yaml(target, ledgerOps, "dbcanary_c41", "", "", "profile: "+profile, "ledger: {ages: [10s]}"), target)
		})
	}
	t.Run("least privilege", func(t *testing.T) { cassandraLeastPrivilege(t, n) })
	t.Run("node up", func(t *testing.T) {
		h := enginetest.Start(t, n.yaml("c41-nodes", `"*": {rate: 0}, insert: {rate: 1}`, "dbcanary_c41", "", ""))
		enginetest.WaitFor(t, 60*time.Second, "dbcanary_store_node_up = 1 for the node", func() bool {
			return h.Value(t, "dbcanary_store_node_up", enginetest.L{"target": "c41-nodes"}) == 1
		})
	})
}

// cassandraLeastPrivilege runs every op of mixed_workload as a role with only
// the grants docs/cassandra.md lists (SELECT, MODIFY and CREATE on a keyspace
// an administrator created).
func cassandraLeastPrivilege(t *testing.T, n cassandraNode) {
	s := n.admin(t)
	for _, stmt := range []string{
		`CREATE KEYSPACE IF NOT EXISTS dbcanary_c41_lp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
		`CREATE ROLE IF NOT EXISTS dbcanary_c41 WITH LOGIN = true AND PASSWORD = 'c41-canary'`,
		`GRANT SELECT, MODIFY ON KEYSPACE dbcanary_c41_lp TO dbcanary_c41`,
		`GRANT CREATE ON KEYSPACE dbcanary_c41_lp TO dbcanary_c41`,
	} {
		if err := s.Query(stmt).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	pw := filepath.Join(t.TempDir(), "password")
	writeFile(t, pw, []byte("c41-canary"))
	everyOp(t, n.yaml("c41-lp", everyOpRates, "dbcanary_c41_lp", "dbcanary_c41", pw), 3, 3*time.Minute)
}
