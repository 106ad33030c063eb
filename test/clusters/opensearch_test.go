//go:build integration

package clusters

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// opensearchConfig is a daemon config with one target on every node of the
// cluster, 1 replica, the shipped timeouts and retries; index, get and a term
// search at 4, 4 and 2/s (the shipped 1, 1 and 0.5/s are too slow for a
// test's phases).
func opensearchConfig(t *testing.T, env stack.Env, target string) string {
	t.Helper()
	urls := strings.Split(env.Get(t, "DBCANARY_TEST_OPENSEARCH_URLS"), ",")
	return fmt.Sprintf(`global:
  state_dir: %s
targets:
  - name: %s
    backend: opensearch
    ops: {index: {rate: 4}, get: {rate: 4}, search_term: {rate: 2}}
    opensearch:
      addresses: [%s]
      replicas: 1
`, t.TempDir(), target, strings.Join(urls, ", "))
}

// TestOpenSearchNodeFaults: the daemon probes the 3-node cluster (every node
// an address, indices with 1 replica) while nodes fail, and a private
// Prometheus evaluates the generated rules (time-scaled) on its metrics:
//   - node 1 (the first address) killed with SIGKILL: once the cluster has
//     moved the node's shards, every op succeeds, and no critical alert fires;
//   - nodes 1 and 2 killed (no cluster-manager quorum): ops fail and
//     DbcanaryTargetDown is the only critical alert; both back: it clears.
func TestOpenSearchNodeFaults(t *testing.T) {
	env := useCluster(t, "opensearch-cluster")
	node := func(i int) clusterNode {
		return clusterNode{script: "opensearch-cluster", env: env, store: "OPENSEARCH", i: i}
	}
	const target = "opensearch-cluster"
	ops := []string{"index", "get", "search_term"}
	d := startDaemon(t, opensearchConfig(t, env, target))
	al := startAlerting(t, d.addr)
	start := d.snap(t, target)
	d.waitOK(t, target, start, ops, 20, 3*time.Minute, "20 successes of each op on the healthy cluster")
	al.waitScraped(t, target)

	phase := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	phase("one node kill -9", func(t *testing.T) {
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		t0 := time.Now()
		node(1).kill9(t)
		settled := d.waitOK(t, target, before, ops, 10, 3*time.Minute, "10 successes of each op after the kill")
		after := d.waitOK(t, target, settled, ops, 40, 3*time.Minute, "40 more successes of each op with one node down")
		crit, warn := al.firedSince(t, "critical", t0), al.firedSince(t, "warning", t0)
		stack.Figure(t, "OpenSearch 3 nodes, 1 replica, node 1 (the first address) kill -9: failures at the kill %v (10 successes of each op after %s), then %v ok index, %v ok get, %v ok search_term with %v failures over %s; critical alerts %v (firing before: %v), warnings %v",
			diff(before.causes, settled.causes), settled.at.Sub(t0).Round(time.Second), after.ok["index"]-settled.ok["index"], after.ok["get"]-settled.ok["get"],
			after.ok["search_term"]-settled.ok["search_term"], total(diff(settled.causes, after.causes)), after.at.Sub(settled.at).Round(time.Second), crit, pre, warn)
		if f := diff(settled.causes, after.causes); len(f) > 0 {
			t.Errorf("with one node of three down, ops failed: %v", f)
		}
		if n := minus(crit, pre); len(n) > 0 {
			t.Errorf("one node of three down fired critical alerts: %v", n)
		}
		al.pageRow(t, "opensearch", target, fmt.Sprintf("node 1 (the first address) `kill -9`, 1 replica; %v failed at the kill, then %v ops ok and %v failed over %s",
			total(diff(before.causes, settled.causes)), total(diff(settled.ok, after.ok)), total(diff(settled.causes, after.causes)), after.at.Sub(settled.at).Round(time.Second)),
			"no page", t0, pre, nil)
		took := restartCluster(t, "opensearch-cluster")
		back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after node 1 is back")
		t.Logf("node 1 restarted in %s; failures while it came back: %v", took.Round(100*time.Millisecond), diff(after.causes, back.causes))
	})

	phase("second node down, then both back", func(t *testing.T) {
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		t0 := time.Now()
		node(1).kill9(t)
		node(2).kill9(t)
		var fired time.Duration
		waitTargetDown(t, al, d, target, before, 3*time.Minute, func() { fired = time.Since(t0) })
		down := d.snap(t, target)
		crit := al.firedSince(t, "critical", t0)
		stack.Figure(t, "OpenSearch 3 nodes, nodes 1 and 2 kill -9: DbcanaryTargetDown firing %s after the kill (rules time-scaled 0.05); failures %v; dbcanary_target_up %v; critical alerts %v, pages after the shipped inhibition %v",
			fired.Round(time.Second), diff(before.causes, down.causes), down.up, crit, pages(crit, target))
		// One fault, one page: what the shipped Alertmanager inhibition
		// leaves of the critical alerts is DbcanaryTargetDown alone.
		if got := pages(crit, target); !slices.Equal(got, []string{"DbcanaryTargetDown{target=" + target + "}"}) {
			t.Errorf("pages with two nodes down: %v (critical alerts %v), want DbcanaryTargetDown alone (one fault, one page)", got, crit)
		}
		al.pageRow(t, "opensearch", target, fmt.Sprintf("nodes 1 and 2 `kill -9` (no cluster-manager quorum): failures %v; DbcanaryTargetDown firing %s after the kill (`for:` scaled to 6 s)",
			diff(before.causes, down.causes), fired.Round(time.Second)),
			"DbcanaryTargetDown alone", t0, pre, []string{"DbcanaryTargetDown{target=" + target + "}"})
		took := restartCluster(t, "opensearch-cluster")
		t1 := time.Now()
		back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after both nodes are back")
		var cleared time.Duration
		waitQuiet(t, al, 3*time.Minute, pre, func() { cleared = time.Since(t1) })
		stack.Figure(t, "OpenSearch 3 nodes, nodes 1 and 2 back (restarted in %s): ops succeed again after %s, no critical alert firing %s after the restart",
			took.Round(100*time.Millisecond), back.at.Sub(t1).Round(time.Second), cleared.Round(time.Second))
	})
}
