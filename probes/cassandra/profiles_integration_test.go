//go:build integration

package cassandra_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
)

// TestProfiles runs both profiles through the real engine: every op fills
// its histograms without a failure, rows carry the TTL, and nothing appears
// in the schema outside the canary keyspace.
func TestProfiles(t *testing.T) {
	a := admin(t)
	mustExec(t, a, `DROP KEYSPACE IF EXISTS dbcanary_it`)
	before := schema(t, a)

	cfg := engineConfig("it-a", "cass-mixed", "insert: {rate: 5}\nread: {rate: 5}\nread_miss: {rate: 2}",
		section(t, "dbcanary_it", "ttl: 10m\nread_min_age: 200ms\nmixed_workload: {a_size: {min: 1, max: 2000}, b_size: {min: 1, max: 20000}}"))
	cfg += `  - name: cass-ycsb
    backend: cassandra
    max_in_flight: 4
    ops: {read: {rate: 5}, update: {rate: 3}}
    cassandra:
` + enginetest.Indent(section(t, "dbcanary_it", "ttl: 10m\nread_min_age: 200ms\nprofile: ycsb_a\nconsistency: {read: LOCAL_QUORUM, update: local_quorum}\nycsb_a: {record_count: 20}"), 6) + "\n"
	h := enginetest.Start(t, cfg)
	enginetest.WaitFor(t, 90*time.Second, "ops of both profiles", func() bool {
		return okCount(t, h, "cass-mixed", "insert") >= 5 && okCount(t, h, "cass-mixed", "read") >= 5 &&
			okCount(t, h, "cass-mixed", "read_miss") >= 2 && okCount(t, h, "cass-ycsb", "read") >= 5 &&
			okCount(t, h, "cass-ycsb", "update") >= 3
	})
	for _, target := range []string{"cass-mixed", "cass-ycsb"} {
		if n := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"target": target, "result": "error"}); n != 0 {
			t.Errorf("%s: %d failed ops", target, n)
		}
		if n := h.HistogramCount(t, "dbcanary_op_service_time_seconds", enginetest.L{"target": target, "result": "ok"}); n == 0 {
			t.Errorf("%s: service time histogram is empty", target)
		}
		if v := h.Value(t, "dbcanary_target_up", enginetest.L{"target": target}); v != 1 {
			t.Errorf("%s: target_up = %v", target, v)
		}
	}

	// Rows carry the configured TTL (10 min), blob by blob and field by field.
	var ttlA, ttlB int
	if err := a.Query(`SELECT TTL(a), TTL(b) FROM dbcanary_it.mixed_workload LIMIT 1`).Scan(&ttlA, &ttlB); err != nil {
		t.Fatal(err)
	}
	if ttlA <= 0 || ttlA > 600 || ttlB <= 0 || ttlB > 600 {
		t.Errorf("mixed_workload TTL(a)=%d TTL(b)=%d, want in (0, 600]", ttlA, ttlB)
	}
	var yid string
	var ttl0 int
	if err := a.Query(`SELECT y_id, TTL(field0) FROM dbcanary_it.usertable LIMIT 1`).Scan(&yid, &ttl0); err != nil {
		t.Fatal(err)
	}
	if ttl0 <= 0 || ttl0 > 600 {
		t.Errorf("usertable TTL(field0)=%d, want in (0, 600]", ttl0)
	}
	var tableTTL int
	if err := a.Query(`SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = 'dbcanary_it' AND table_name = 'mixed_workload'`).Scan(&tableTTL); err != nil || tableTTL != 600 {
		t.Errorf("default_time_to_live = %d (%v), want 600", tableTTL, err)
	}
	// Every ycsb key belongs to this instance and to the bounded key space.
	iter := a.Query(`SELECT y_id FROM dbcanary_it.usertable`).Iter()
	n := 0
	for iter.Scan(&yid) {
		n++
		if !strings.HasPrefix(yid, "it-a-") {
			t.Errorf("usertable key %q does not belong to instance it-a", yid)
		}
	}
	if err := iter.Close(); err != nil || n == 0 || n > 20 {
		t.Errorf("usertable has %d rows (%v), want 1..20", n, err)
	}

	h.Engine.Stop()
	after := schema(t, a)
	var added []string
	for _, s := range after {
		// make test runs other packages at the same time (its second lane), whose
		// daemons create keyspaces of their own (dbcanary_secrets, ...): only the
		// rest of the schema must stay as it was.
		if ks, _, _ := strings.Cut(s, "."); ks != "dbcanary_it" && strings.HasPrefix(ks, "dbcanary_") {
			continue
		}
		if !slices.Contains(before, s) {
			added = append(added, s)
		}
	}
	want := []string{"dbcanary_it", "dbcanary_it.mixed_workload", "dbcanary_it.usertable"}
	if strings.Join(added, " ") != strings.Join(want, " ") {
		t.Errorf("schema added %v, want only %v", added, want)
	}
	for _, s := range before {
		if !slices.Contains(after, s) {
			t.Errorf("schema lost %s", s)
		}
	}
}
