//go:build integration

package clusters

import (
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// TestOpenSearchFirstAddressDownAtStart is issue 21 item 5 for OpenSearch: the
// node of the first address is killed (SIGKILL) before the daemon starts. The
// client tries the next address on a refused connection, so no op fails and
// the target is up; dbcanary_store_node_up names the first node down and the
// others up. The node is restarted at the end.
func TestOpenSearchFirstAddressDownAtStart(t *testing.T) {
	env := useCluster(t, "opensearch-cluster")
	urls := strings.Split(env.Get(t, "DBCANARY_TEST_OPENSEARCH_URLS"), ",")
	if len(urls) < 3 {
		t.Fatalf("cluster urls %v, want 3", urls)
	}
	node := func(i int) clusterNode {
		return clusterNode{script: "opensearch-cluster", env: env, store: "OPENSEARCH", i: i}
	}
	const target = "opensearch-first-down"
	ops := []string{"index", "get", "search_term"}
	node(1).kill9(t)
	t.Cleanup(func() { restartCluster(t, "opensearch-cluster") })

	t0 := time.Now()
	d := startDaemon(t, opensearchConfig(t, env, target))
	start := d.snap(t, target)
	first := d.waitOK(t, target, start, ops, 1, 3*time.Minute, "a success of each op with node 1 down from the start")
	after := d.waitOK(t, target, first, ops, 20, 3*time.Minute, "20 more successes of each op")
	host := func(u string) string { return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://") }
	want := map[string]float64{host(urls[0]): 0, host(urls[1]): 1, host(urls[2]): 1}
	d.waitNodes(t, target, want, 2*time.Minute, "node 1 down, nodes 2 and 3 up in dbcanary_store_node_up")
	fails := diff(start.causes, after.causes)
	stack.Figure(t, "OpenSearch 3 nodes, node 1 (the first address) down before the daemon starts: first success of every op %s after start, then %v index, %v get, %v search_term ok; failures %v; dbcanary_target_up %v; dbcanary_store_node_up %v",
		first.at.Sub(t0).Round(100*time.Millisecond), after.ok["index"]-first.ok["index"], after.ok["get"]-first.ok["get"], after.ok["search_term"]-first.ok["search_term"],
		fails, after.up, d.nodes(t, target))
	if len(fails) > 0 {
		t.Errorf("ops failed with the first address's node down at start-up: %v", fails)
	}
	if after.up != 1 {
		t.Errorf("dbcanary_target_up = %v, want 1", after.up)
	}
}
