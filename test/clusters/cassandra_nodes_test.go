//go:build integration

package clusters

import (
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/test/stack"
)

// TestCassandraWhichNode is "which node" of issue 21 for Cassandra: one
// target per node, each pinned to its node (pin_hosts: the listed host is
// the only coordinator), the shipped consistency (LOCAL_QUORUM, RF 3). With
// node 3 slowed through its toxiproxy (client <-> node 3 only; the nodes talk
// to each other directly), node 3's target shows the added latency and the
// other two do not: the slow coordinator is named by its target.
//
// Each target has a keyspace of its own: three first-time CREATE TABLE IF NOT
// EXISTS of one table through three coordinators at once can give the table
// two ids, and rows written under the id that loses are gone (found here on
// 26 Nov 2026: not_found reads on node 3's target; docs/clusters.md, "What is
// left").
func TestCassandraWhichNode(t *testing.T) {
	cassandra = useCluster(t, "cassandra-cluster")
	hosts := strings.Split(cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_HOSTS"), ",")
	if len(hosts) < 3 {
		t.Fatalf("cluster hosts %v, want 3", hosts)
	}
	var targets, names []string
	for i, h := range hosts[:3] {
		name := fmt.Sprintf("cas-node%d", i+1)
		names = append(names, name)
		targets = append(targets, fmt.Sprintf(`  - name: %s
    backend: cassandra
    labels: {node: %q}
    ops: {insert: {rate: 4}, read: {rate: 4}}
    cassandra:
      hosts: [%s]
      pin_hosts: true
      port: %s
      local_dc: %s
      keyspace: dbcanary_clusters_node%d
      replication: {class: NetworkTopologyStrategy, datacenters: {%s: 3}}
`, name, h, h, cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"), cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_DC"), i+1, cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_DC")))
	}
	d := startDaemon(t, fmt.Sprintf("global:\n  state_dir: %s\ntargets:\n%s", t.TempDir(), strings.Join(targets, "")))
	ops := []string{"insert", "read"}
	base := map[string]snapshot{}
	for _, n := range names {
		base[n] = d.waitOK(t, n, d.snap(t, n), ops, 20, 3*time.Minute, n+": 20 successful inserts and reads on the healthy cluster")
	}
	ref := map[string]snapshot{}
	for _, n := range names {
		ref[n] = d.waitOK(t, n, base[n], ops, 20, 3*time.Minute, n+": 20 more before the slowdown")
	}
	healthy := time.Duration(0)
	for _, n := range names {
		healthy = max(healthy, meanOK(base[n], ref[n], "insert"), meanOK(base[n], ref[n], "read"))
	}
	// 3 x the healthy mean, within 20-250 ms (a loaded machine can make the
	// healthy mean large; the ops must stay well inside their timeout).
	added := min(max(3*healthy, 20*time.Millisecond), 250*time.Millisecond)

	tp := toxiproxy.NewClient(cassandra.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	proxy, err := tp.Proxy(cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_NODE3_PROXY"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.AddToxic("slow", "latency", "downstream", 1, toxiproxy.Attributes{"latency": added.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.RemoveToxic("slow") })
	before := map[string]snapshot{}
	for _, n := range names {
		before[n] = d.snap(t, n)
	}
	var figs []string
	shift := map[string]time.Duration{}
	for _, n := range names {
		after := d.waitOK(t, n, before[n], ops, 30, 3*time.Minute, n+": 30 successes with node 3 slowed")
		if f := diff(before[n].causes, after.causes); len(f) > 0 {
			t.Errorf("%s: ops failed with node 3 slowed: %v", n, f)
		}
		for _, op := range ops {
			s := meanOK(before[n], after, op) - meanOK(base[n], ref[n], op)
			shift[n] = max(shift[n], s)
			figs = append(figs, fmt.Sprintf("%s %s %s -> %s", n, op, meanOK(base[n], ref[n], op).Round(100*time.Microsecond), meanOK(before[n], after, op).Round(100*time.Microsecond)))
		}
	}
	stack.Figure(t, "Cassandra 3 nodes, one target per node (pin_hosts), node 3 slowed (+%s per answer): mean latency %s", added, strings.Join(figs, ", "))
	// Node 3's target carries the added latency; the others at most a
	// fraction of it (they coordinate on nodes 1 and 2, which reach node 3
	// directly, not through the slowed proxy).
	if shift["cas-node3"] < added/2 {
		t.Errorf("node 3's target: mean latency up %s, want at least half the added %s", shift["cas-node3"], added)
	}
	for _, n := range names[:2] {
		if shift[n] > added/4 {
			t.Errorf("%s: mean latency up %s with node 3 slowed by %s: the slow node is not told apart", n, shift[n], added)
		}
	}
}
