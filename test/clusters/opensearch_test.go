//go:build integration

package clusters

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
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
		// The next phase starts from a whole cluster: node 1 joined and the
		// canary index's replica assigned again.
		waitGreen(t, env, 3*time.Minute)
		t.Logf("node 1 restarted in %s; failures while it came back: %v", took.Round(100*time.Millisecond), diff(after.causes, back.causes))
	})

	phase("second node down, then both back", func(t *testing.T) {
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		t0 := time.Now()
		node(1).kill9(t)
		node(2).kill9(t)
		// Two outcomes are OpenSearch's, not dbcanary's, and both are
		// checked: with no cluster manager, OpenSearch 2.x blocks only
		// metadata writes (cluster.no_cluster_manager_block defaults to
		// metadata_write). If node 1's removal was published (node 2 still
		// voting) before node 2 died, node 3 holds the canary index's
		// primary with no in-sync replica left and keeps indexing and
		// serving it: the canary's ops succeed, and the page is
		// DbcanaryStoreMajorityDown (two of three nodes down). Otherwise the canary's writes wait for a replica or a manager and
		// time out: DbcanaryTargetDown alone.
		outcome, fired := waitTwoDown(t, al, d, target, before, 3*time.Minute)
		majority := "DbcanaryStoreMajorityDown{target=" + target + "}"
		if fired == 0 {
			// Served by a lone node without a cluster manager: the page is
			// that most of the store's nodes are down.
			enginetest.WaitFor(t, 2*time.Minute, majority+" firing", func() bool {
				return slices.Contains(al.firing(t, "critical"), majority)
			})
			outcome += fmt.Sprintf("; %s firing %s after the kill (`for:` scaled to 6 s)", majority, time.Since(t0).Round(time.Second))
		}
		down := d.snap(t, target)
		crit := al.firedSince(t, "critical", t0)
		state := lastNodeState(t, env, 3)
		stack.Figure(t, "OpenSearch 3 nodes, nodes 1 and 2 kill -9: %s; failures %v, ok %v; dbcanary_target_up %v; dbcanary_store_node_up %v; critical alerts %v, pages after the shipped inhibition %v; node 3's own view: %s",
			outcome, diff(before.causes, down.causes), diff(before.ok, down.ok), down.up, d.nodes(t, target), crit, pages(minus(crit, pre), target), state)
		want := []string{"DbcanaryTargetDown{target=" + target + "}"}
		expected := "DbcanaryTargetDown alone (the store refuses or times out the canary's writes)"
		if fired == 0 {
			want, expected = []string{majority}, "DbcanaryStoreMajorityDown alone: node 3 alone still indexes and serves the canary's index (no cluster manager blocks metadata writes only)"
		}
		// One fault, one page: what the shipped Alertmanager inhibition
		// leaves of the critical alerts is DbcanaryTargetDown alone, or
		// DbcanaryStoreMajorityDown alone when the store still serves the canary.
		if got := pages(minus(crit, pre), target); !slices.Equal(got, want) {
			t.Errorf("pages with two nodes down (%s): %v (critical alerts %v), want %v (one fault, one page)", outcome, got, crit, want)
		}
		al.pageRow(t, "opensearch", target, fmt.Sprintf("nodes 1 and 2 `kill -9` (no cluster-manager quorum): %s; failures %v; node 3's view: %s",
			outcome, diff(before.causes, down.causes), state), expected, t0, pre, want)
		// A failed op names the node(s) its requests went to (the status
		// page and /status.json show them).
		if total(diff(before.causes, down.causes)) > 0 {
			msgs := d.statusErrors(t, target)
			named := 0
			for _, m := range msgs {
				if strings.Contains(m, "(node ") || strings.Contains(m, "(nodes ") {
					named++
				}
			}
			stack.Figure(t, "OpenSearch 3 nodes, nodes 1 and 2 kill -9: %d of the %d recent error messages on the status page name the node; e.g. %q", named, len(msgs), first(msgs))
			if named == 0 {
				t.Errorf("no failed op's error names its node: %q", msgs)
			}
		}
		took := restartCluster(t, "opensearch-cluster")
		t1 := time.Now()
		back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after both nodes are back")
		var cleared time.Duration
		waitQuiet(t, al, 3*time.Minute, pre, func() { cleared = time.Since(t1) })
		stack.Figure(t, "OpenSearch 3 nodes, nodes 1 and 2 back (restarted in %s): ops succeed again after %s, no critical alert firing %s after the restart",
			took.Round(100*time.Millisecond), back.at.Sub(t1).Round(time.Second), cleared.Round(time.Second))
	})
}

// waitTwoDown waits, after two of three OpenSearch nodes were killed, until
// either DbcanaryTargetDown fires (fired > 0) or the store has clearly kept
// serving the canary: both killed nodes read 0 in dbcanary_store_node_up
// and, after that, 40 more successes of each op with no failure.
func waitTwoDown(t *testing.T, al *alerting, d *daemon, target string, before snapshot, timeout time.Duration) (outcome string, fired time.Duration) {
	t.Helper()
	t0 := time.Now()
	alert := "DbcanaryTargetDown{target=" + target + "}"
	var gone *snapshot
	for time.Since(t0) < timeout {
		if slices.Contains(al.firing(t, "critical"), alert) {
			return fmt.Sprintf("DbcanaryTargetDown firing %s after the kill", time.Since(t0).Round(time.Second)), time.Since(t0)
		}
		now := d.snap(t, target)
		if gone == nil {
			nodes := d.nodes(t, target)
			downs := 0
			for _, v := range nodes {
				if v == 0 {
					downs++
				}
			}
			if downs >= 2 {
				gone = &now
			}
		} else if len(diff(gone.causes, now.causes)) > 0 {
			gone = nil // failing after all: wait for the page
		} else if ok := diff(gone.ok, now.ok); ok["index"] >= 40 && ok["get"] >= 40 {
			return fmt.Sprintf("the store kept serving the canary: %v ok and no failure in the %s after both nodes read down", ok, now.at.Sub(gone.at).Round(time.Second)), 0
		}
		time.Sleep(200 * time.Millisecond)
	}
	now := d.snap(t, target)
	t.Fatalf("after %s neither %s fired nor did the store serve: ok %v, failed %v since the kill, dbcanary_target_up %v, nodes %v",
		timeout, alert, diff(before.ok, now.ok), diff(before.causes, now.causes), now.up, d.nodes(t, target))
	return "", 0
}

// lastNodeState is node i's own view of the cluster (local=true: no cluster
// manager needed): its cluster manager, blocks, and the canary shards' copies.
func lastNodeState(t *testing.T, env stack.Env, i int) string {
	t.Helper()
	base := strings.Split(env.Get(t, "DBCANARY_TEST_OPENSEARCH_URLS"), ",")[i-1]
	get := func(path string) string {
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(base + path)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		return strings.Join(strings.Fields(string(b)), " ")
	}
	return "cluster manager and blocks " + get("/_cluster/state/cluster_manager_node,blocks?local=true&filter_path=cluster_manager_node,blocks") +
		"; canary shards " + get("/_cat/shards/dbcanary-*?local=true&h=index,shard,prirep,state,node")
}

// waitGreen waits until the cluster reports green with all its nodes (asked
// of node 3, which no phase kills).
func waitGreen(t *testing.T, env stack.Env, timeout time.Duration) {
	t.Helper()
	urls := strings.Split(env.Get(t, "DBCANARY_TEST_OPENSEARCH_URLS"), ",")
	q := fmt.Sprintf("%s/_cluster/health?wait_for_status=green&wait_for_nodes=%d&timeout=5s", urls[len(urls)-1], len(urls))
	var last string
	enginetest.WaitFor(t, timeout, "the OpenSearch cluster green with every node", func() bool {
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(q)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		last = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(last, `"status":"green"`)
	})
	t.Logf("cluster green: %s", last)
}
