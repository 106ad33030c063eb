//go:build integration

package cassandra_test

import (
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestUnavailableSaysWhy: a keyspace with replication factor 3 on the
// one-node cluster, written at QUORUM: the coordinator refuses at once
// (Unavailable, two replicas needed, one alive), and the probe's error names
// the level and both counts, with cause server.
func TestUnavailableSaysWhy(t *testing.T) {
	a := admin(t)
	mustExec(t, a, `DROP KEYSPACE IF EXISTS dbcanary_unavail`)
	t.Cleanup(func() { _ = a.Query(`DROP KEYSPACE IF EXISTS dbcanary_unavail`).Exec() })
	rf3 := func(consistency string) string {
		return strings.Replace(section(t, "dbcanary_unavail", "consistency: "+consistency+"\n"), "replication_factor: 1", "replication_factor: 3", 1)
	}
	// The read's probe writes at ONE (which one node satisfies) so that its
	// read at QUORUM is what the coordinator refuses.
	for _, tc := range []struct{ op, consistency string }{
		{"insert", "{insert: QUORUM, read: QUORUM}"},
		{"read", "{insert: ONE, read: QUORUM}"},
	} {
		p := newProbe(t, "unavail-"+tc.op, rf3(tc.consistency))
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		err := run(t, p, tc.op)
		if err == nil {
			t.Fatalf("%s at QUORUM with replication factor 3 on one node succeeded", tc.op)
		}
		if c := probes.CauseOf(err); c != probes.CauseServer {
			t.Errorf("%s: cause %q, want server: %v", tc.op, c, err)
		}
		for _, want := range []string{tc.op + ": Unavailable: QUORUM needs 2 replicas, 1 alive", "nodetool status"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not say %q: %v", tc.op, want, err)
			}
		}
		t.Logf("%s: %v", tc.op, err)
	}
}
