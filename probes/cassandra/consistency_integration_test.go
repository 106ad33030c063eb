//go:build integration

package cassandra_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/cassandra"
)

// logBuffer collects a probe's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func loggedProbe(t *testing.T, instance, cass string) (*cassandra.Probe, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg := enginetest.Parse(t, engineConfig(instance, "weak", "read: {rate: 1}", cass))
	p, err := cassandra.New(probes.Target{Name: "weak", InstanceID: instance, Config: cfg.Targets[0].Probe, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, logs
}

// TestWeakConsistencyIsStaleNotLoss: with levels whose reads may miss writes
// (ONE and ONE with replication factor 2), the probe warns when built, and a
// row missing at ONE is cause stale, not data loss, when no read at a level
// overlapping the write can tell (LOCAL_QUORUM needs two replicas; this cluster has
// one node). Bytes that no replica could have served stay a mismatch.
func TestWeakConsistencyIsStaleNotLoss(t *testing.T) {
	a := admin(t)
	mustExec(t, a, `DROP KEYSPACE IF EXISTS dbcanary_weak`)
	t.Cleanup(func() { _ = a.Query(`DROP KEYSPACE IF EXISTS dbcanary_weak`).Exec() })
	rf2 := func(extra string) string {
		return strings.Replace(section(t, "dbcanary_weak", extra), "replication_factor: 1", "replication_factor: 2", 1)
	}
	p, logs := loggedProbe(t, "weak", rf2("consistency: {insert: ONE, read: ONE}\nmixed_workload: {recent_keys: 1}\n"))
	if !strings.Contains(logs.String(), "consistency: insert at ONE and read at ONE do not overlap with SimpleStrategy, replication factor 2 (R + W <= RF)") {
		t.Errorf("no start-up warning; logs:\n%s", logs)
	}
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	if err := run(t, p, "insert"); err != nil {
		t.Fatal(err)
	}
	if err := run(t, p, "read"); err != nil {
		t.Fatalf("read of an intact row: %v", err)
	}
	var key gocql.UUID
	if err := a.Query(`SELECT key FROM dbcanary_weak.mixed_workload LIMIT 1`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	mustExec(t, a, `UPDATE dbcanary_weak.mixed_workload SET b = 0x00 WHERE key = ?`, key)
	if err := run(t, p, "read"); probes.CauseOf(err) != probes.CauseMismatch {
		t.Fatalf("read of a row with other bytes: cause %q (%v), want mismatch: no replica ever held them", probes.CauseOf(err), err)
	}
	mustExec(t, a, `DELETE FROM dbcanary_weak.mixed_workload WHERE key = ?`, key)
	err := run(t, p, "read")
	if probes.CauseOf(err) != probes.CauseStale || !strings.Contains(err.Error(), "the read at LOCAL_QUORUM that would tell a stale replica from data loss failed") {
		t.Fatalf("read of a row missing at ONE: cause %q (%v), want stale", probes.CauseOf(err), err)
	}
	t.Logf("stale: %v", err)

	y, _ := loggedProbe(t, "weak", rf2("consistency: {update: ONE, read: ONE}\nprofile: ycsb_a\nycsb_a: {record_count: 1}\n"))
	if err := prepare(t, y); err != nil {
		t.Fatal(err)
	}
	if err := run(t, y, "update"); err != nil {
		t.Fatal(err)
	}
	if err := run(t, y, "read"); err != nil {
		t.Fatalf("ycsb read of an intact record: %v", err)
	}
	mustExec(t, a, `DELETE FROM dbcanary_weak.usertable WHERE y_id = 'weak-0'`)
	if err := run(t, y, "read"); probes.CauseOf(err) != probes.CauseStale {
		t.Fatalf("ycsb read of a record missing at ONE: cause %q (%v), want stale", probes.CauseOf(err), err)
	}
}

// TestPreCreatedKeyspaceDecides: the consistency check uses the replication
// of the keyspace as it exists (the configured one only creates it): a
// keyspace pre-created with replication factor 2 makes ONE/ONE weak although
// the configuration says 1, and the probe warns at Prepare.
func TestPreCreatedKeyspaceDecides(t *testing.T) {
	a := admin(t)
	mustExec(t, a, `DROP KEYSPACE IF EXISTS dbcanary_pre`)
	mustExec(t, a, `CREATE KEYSPACE dbcanary_pre WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}`)
	t.Cleanup(func() { _ = a.Query(`DROP KEYSPACE IF EXISTS dbcanary_pre`).Exec() })
	p, logs := loggedProbe(t, "pre", section(t, "dbcanary_pre", "consistency: {insert: ONE, read: ONE}\nmixed_workload: {recent_keys: 1}\n"))
	if strings.Contains(logs.String(), "do not overlap") {
		t.Fatalf("warned with the configured replication factor 1:\n%s", logs)
	}
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "do not overlap with SimpleStrategy, replication factor 2") {
		t.Errorf("no warning for the existing keyspace's replication factor 2; logs:\n%s", logs)
	}
	if err := run(t, p, "insert"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, a, `TRUNCATE dbcanary_pre.mixed_workload`)
	if err := run(t, p, "read"); probes.CauseOf(err) != probes.CauseStale {
		t.Fatalf("read of a row missing at ONE: cause %q (%v), want stale", probes.CauseOf(err), err)
	}
}
