//go:build integration

package cassandra_test

import (
	"errors"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// TestMismatch alters rows behind the canary's back: its reads say mismatch
// (or not_found for a deleted row), for both profiles.
func TestMismatch(t *testing.T) {
	a := admin(t)
	mustExec(t, a, `DROP KEYSPACE IF EXISTS dbcanary_mm`)

	p := newProbe(t, "mm", section(t, "dbcanary_mm", "read_min_age: 0s\nmixed_workload: {a_size: {min: 10, max: 100}, b_size: {min: 10, max: 1000}}"))
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
	if err := a.Query(`SELECT key FROM dbcanary_mm.mixed_workload LIMIT 1`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	mustExec(t, a, `UPDATE dbcanary_mm.mixed_workload SET b = 0x00 WHERE key = ?`, key)
	err := run(t, p, "read")
	if probes.CauseOf(err) != probes.CauseMismatch {
		t.Fatalf("read after altering blob b: cause %q (%v), want mismatch", probes.CauseOf(err), err)
	}
	t.Logf("mismatch: %v", err)
	mustExec(t, a, `DELETE FROM dbcanary_mm.mixed_workload WHERE key = ?`, key)
	if err := run(t, p, "read"); probes.CauseOf(err) != probes.CauseNotFound {
		t.Fatalf("read after deleting the row: cause %q (%v), want not_found", probes.CauseOf(err), err)
	}

	y := newProbe(t, "mm", section(t, "dbcanary_mm", "read_min_age: 0s\nprofile: ycsb_a\nycsb_a: {record_count: 1}"))
	if err := prepare(t, y); err != nil {
		t.Fatal(err)
	}
	if err := run(t, y, "update"); err != nil {
		t.Fatal(err)
	}
	if err := run(t, y, "read"); err != nil {
		t.Fatalf("read of an intact record: %v", err)
	}
	mustExec(t, a, `UPDATE dbcanary_mm.usertable SET field7 = 'tampered' WHERE y_id = 'mm-0'`)
	if err := run(t, y, "read"); probes.CauseOf(err) != probes.CauseMismatch {
		t.Fatalf("ycsb read after altering field7: cause %q (%v), want mismatch", probes.CauseOf(err), err)
	}
}

// TestTableDropped drops the canary table: the op reports not_found wrapped
// in ErrNamespaceGone, and Prepare creates it again.
func TestTableDropped(t *testing.T) {
	a := admin(t)
	mustExec(t, a, `DROP KEYSPACE IF EXISTS dbcanary_gone`)
	p := newProbe(t, "gone", section(t, "dbcanary_gone", ""))
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	if err := run(t, p, "insert"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, a, `DROP TABLE dbcanary_gone.mixed_workload`)
	err := run(t, p, "insert")
	if !errors.Is(err, probes.ErrNamespaceGone) {
		t.Fatalf("insert into a dropped table: %v, want ErrNamespaceGone", err)
	}
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	if err := run(t, p, "read"); err != nil {
		t.Fatalf("read after the table came back: %v", err)
	}
}
