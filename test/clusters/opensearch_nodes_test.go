//go:build integration

package clusters

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/stack"
)

// osNodeAddrs are the cluster's nodes as dbcanary_store_node_up names them
// (host:port of each address).
func osNodeAddrs(t *testing.T, env stack.Env) []string {
	t.Helper()
	var out []string
	for _, a := range strings.Split(env.Get(t, "DBCANARY_TEST_OPENSEARCH_URLS"), ",") {
		u, err := url.Parse(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u.Host)
	}
	if len(out) < 3 {
		t.Fatalf("cluster addresses %v, want 3", out)
	}
	return out
}

// TestOpenSearchNodeDownWarning is "which node" (issue 21 item 4) for
// OpenSearch: one target on the whole 3-node cluster (every node an address,
// 1 replica). With node 2 killed by SIGKILL the target keeps serving through
// nodes 1 and 3; dbcanary_store_node_up (the driver's own view: it marks the
// node dead when a request routed to it fails) goes to 0 for node 2 only,
// DbcanaryStoreNodeDown fires on the private Prometheus (rules time-scaled
// 0.05: for: 5m -> 15s) naming node 2 and the target, and no critical alert
// fires. Node 2 restarted: the gauge is 1 again (the driver's health check
// resurrects it) and the warning resolves.
func TestOpenSearchNodeDownWarning(t *testing.T) {
	env := useCluster(t, "opensearch-cluster")
	addr := osNodeAddrs(t, env)
	const target = "opensearch-nodes"
	ops := []string{"index", "get", "search_term"}
	d := startDaemon(t, opensearchConfig(t, env, target))
	al := startAlerting(t, d.addr)
	start := d.snap(t, target)
	d.waitOK(t, target, start, ops, 20, 3*time.Minute, "20 successes of each op on the healthy cluster")
	al.waitScraped(t, target)
	allUp := map[string]float64{addr[0]: 1, addr[1]: 1, addr[2]: 1}
	d.waitNodes(t, target, allUp, 2*time.Minute, "the three nodes up in dbcanary_store_node_up")

	before := d.snap(t, target)
	pre := al.firing(t, "critical")
	t0 := time.Now()
	node := clusterNode{script: "opensearch-cluster", env: env, store: "OPENSEARCH", i: 2}
	node.kill9(t)
	down := map[string]float64{addr[0]: 1, addr[1]: 0, addr[2]: 1}
	d.waitNodes(t, target, down, 3*time.Minute, "node 2 down, nodes 1 and 3 up in dbcanary_store_node_up")
	seen := time.Since(t0)
	settled := d.waitOK(t, target, before, ops, 10, 3*time.Minute, "10 successes of each op after the kill")
	fired := al.waitNodeAlert(t, target, []string{addr[1]}, 3*time.Minute)
	firedAfter := time.Since(t0)
	after := d.waitOK(t, target, settled, ops, 20, 3*time.Minute, "20 more successes of each op with node 2 down")
	// The gauge still says node 2 only: a node that flapped would show here.
	if got := d.nodes(t, target); !mapsEqual(got, down) {
		t.Errorf("dbcanary_store_node_up with node 2 down: %v, want %v", got, down)
	}
	crit, warn := al.firedSince(t, "critical", t0), al.firedSince(t, "warning", t0)
	stack.Figure(t, "OpenSearch 3 nodes, 1 replica, node 2 kill -9, one target on every address: dbcanary_store_node_up{node=%s} 0 after %s (the others 1); %s firing %s after the kill (rules time-scaled 0.05: for: 5m -> 15s), summary %q; failures at the kill %v (10 successes of each op after %s), then %v ok index, %v ok get, %v ok search_term with failures %v over %s; dbcanary_target_up %v; critical alerts %v (firing before: %v), warnings %v",
		addr[1], seen.Round(100*time.Millisecond), generate.AlertStoreNodeDown, firedAfter.Round(time.Second), fired["summary"],
		diff(before.causes, settled.causes), settled.at.Sub(t0).Round(time.Second),
		after.ok["index"]-settled.ok["index"], after.ok["get"]-settled.ok["get"], after.ok["search_term"]-settled.ok["search_term"],
		diff(settled.causes, after.causes), after.at.Sub(settled.at).Round(time.Second), after.up, crit, pre, warn)
	if !strings.Contains(fired["summary"], addr[1]) || !strings.Contains(fired["summary"], target) ||
		!strings.Contains(fired["description"], addr[1]) {
		t.Errorf("%s does not name node %s and target %s: %v", generate.AlertStoreNodeDown, addr[1], target, fired)
	}
	if f := diff(settled.causes, after.causes); len(f) > 0 {
		t.Errorf("with one node of three down, ops failed: %v", f)
	}
	if after.up != 1 {
		t.Errorf("dbcanary_target_up = %v with one node down, want 1", after.up)
	}
	if n := minus(crit, pre); len(n) > 0 {
		t.Errorf("one node of three down paged: %v; %s is a warning", n, generate.AlertStoreNodeDown)
	}
	al.pageRow(t, "opensearch", target, fmt.Sprintf("node 2 `kill -9`, held past the warning's `for:`: dbcanary_store_node_up{node=%q} 0 after %s; %s firing %s after the kill (`for:` scaled to 15 s)",
		addr[1], seen.Round(100*time.Millisecond), generate.AlertStoreNodeDown, firedAfter.Round(time.Second)),
		"no page; DbcanaryStoreNodeDown (ticket) naming the node", t0, pre, nil)

	took := restartCluster(t, "opensearch-cluster")
	t1 := time.Now()
	d.waitNodes(t, target, allUp, 3*time.Minute, "node 2 up again in dbcanary_store_node_up")
	upAgain := time.Since(t1)
	enginetest.WaitFor(t, 3*time.Minute, generate.AlertStoreNodeDown+" to resolve", func() bool {
		return len(al.query(t, `ALERTS{alertname="`+generate.AlertStoreNodeDown+`"}`)) == 0
	})
	resolved := time.Since(t1)
	back := d.snap(t, target)
	stack.Figure(t, "OpenSearch 3 nodes, node 2 back (restarted in %s): dbcanary_store_node_up 1 again %s after the restart (the driver's resurrection), %s resolved %s after it; failures while it came back %v; critical alerts since the kill %v",
		took.Round(100*time.Millisecond), upAgain.Round(100*time.Millisecond), generate.AlertStoreNodeDown, resolved.Round(time.Second),
		diff(after.causes, back.causes), minus(al.firedSince(t, "critical", t0), pre))
}

// TestOpenSearchWhichNode is "which node" of issue 21 for OpenSearch: one
// target per node, each with one address (the node's HTTP port through a
// toxiproxy of the test's own), so each node coordinates every request of
// its target. With node 3 slowed through its proxy (client <-> node 3 only;
// the nodes talk to each other directly), node 3's target shows the added
// latency and the other two do not: the slow coordinator is named by its
// target. Then node 3's proxy is cut: node 3's target reads its node down
// (the single-address check, GET / every 30 s) and the others do not.
//
// Each target has its own canary indices (the default index_prefix,
// dbcanary-<target>-).
func TestOpenSearchWhichNode(t *testing.T) {
	env := useCluster(t, "opensearch-cluster")
	addr := osNodeAddrs(t, env)
	tp := startToxiproxy(t)
	var targets, names, proxied []string
	proxies := map[string]*toxiproxy.Proxy{}
	for i, a := range addr[:3] {
		name := fmt.Sprintf("os-node%d", i+1)
		listen := fmt.Sprintf("127.0.0.1:%d", stack.FreePort(t))
		p, err := tp.CreateProxy(name, listen, a)
		if err != nil {
			t.Fatal(err)
		}
		proxies[name] = p
		names, proxied = append(names, name), append(proxied, listen)
		targets = append(targets, fmt.Sprintf(`  - name: %s
    backend: opensearch
    labels: {node: %q}
    ops: {index: {rate: 2}, get: {rate: 2}, search_term: {rate: 1}}
    opensearch:
      addresses: [http://%s]
      replicas: 1
`, name, a, listen))
	}
	d := startDaemon(t, fmt.Sprintf("global:\n  state_dir: %s\ntargets:\n%s", t.TempDir(), strings.Join(targets, "")))
	al := startAlerting(t, d.addr)
	ops := []string{"index", "get", "search_term"}
	base := map[string]snapshot{}
	for _, n := range names {
		base[n] = d.waitOK(t, n, d.snap(t, n), ops, 10, 3*time.Minute, n+": 10 successes of each op on the healthy cluster")
	}
	for i, n := range names {
		d.waitNodes(t, n, map[string]float64{proxied[i]: 1}, time.Minute, n+": its node up in dbcanary_store_node_up")
	}
	ref := map[string]snapshot{}
	for _, n := range names {
		ref[n] = d.waitOK(t, n, base[n], ops, 20, 3*time.Minute, n+": 20 more before the slowdown")
	}
	healthy := time.Duration(0)
	for _, n := range names {
		for _, op := range ops {
			healthy = max(healthy, meanOK(base[n], ref[n], op))
		}
	}
	// 3 x the healthy mean (the node answers 4 x slower), within 20-250 ms
	// (a loaded machine can make the healthy mean large; the ops must stay
	// well inside their timeout).
	added := min(max(3*healthy, 20*time.Millisecond), 250*time.Millisecond).Truncate(time.Millisecond) // the toxic takes whole ms
	if _, err := proxies["os-node3"].AddToxic("slow", "latency", "downstream", 1, toxiproxy.Attributes{"latency": added.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	tSlow, pre := time.Now(), al.firing(t, "critical")
	before := map[string]snapshot{}
	for _, n := range names {
		before[n] = d.snap(t, n)
	}
	shift, slowed, figs := slowNodeShift(t, d, names, ops, ops, 20, base, ref, before)
	stack.Figure(t, "OpenSearch 3 nodes, one target per node (one address each, through its proxy), node 3 slowed (+%s per answer, 3 x the healthy mean of %s): mean latency %s",
		added, healthy.Round(100*time.Microsecond), figs)
	al.pageRow(t, "opensearch", "os-node3", fmt.Sprintf("node 3 slowed ×4 (toxiproxy +%s on its answers), one target per node: os-node3's mean latency up %s at most, the others' %s and %s",
		added, shift["os-node3"].Round(100*time.Microsecond), shift["os-node1"].Round(100*time.Microsecond), shift["os-node2"].Round(100*time.Microsecond)),
		"no page at production latencies (the slow node named by its target's latency)", tSlow, pre, nil)
	checkSlowNode(t, names, shift, added, "mean latency")
	for i, n := range names {
		if got := d.nodes(t, n); !mapsEqual(got, map[string]float64{proxied[i]: 1}) {
			t.Errorf("%s: dbcanary_store_node_up %v with node 3 slowed, want its node up", n, got)
		}
	}
	if err := proxies["os-node3"].RemoveToxic("slow"); err != nil {
		t.Fatal(err)
	}

	// Node 3 unreachable (its proxy refuses): the single-address check reads
	// it down; the other targets' nodes stay up.
	t0 := time.Now()
	if err := proxies["os-node3"].Disable(); err != nil {
		t.Fatal(err)
	}
	d.waitNodes(t, "os-node3", map[string]float64{proxied[2]: 0}, 2*time.Minute, "os-node3: its node down in dbcanary_store_node_up")
	seen := time.Since(t0)
	for i, n := range names[:2] {
		if got := d.nodes(t, n); !mapsEqual(got, map[string]float64{proxied[i]: 1}) {
			t.Errorf("%s: dbcanary_store_node_up %v with node 3 cut off, want its node up", n, got)
		}
	}
	cut := d.snap(t, "os-node3")
	t1 := time.Now()
	if err := proxies["os-node3"].Enable(); err != nil {
		t.Fatal(err)
	}
	back := d.waitOK(t, "os-node3", cut, ops, 1, 3*time.Minute, "os-node3: a success of each op after its proxy is back")
	d.waitNodes(t, "os-node3", map[string]float64{proxied[2]: 1}, 2*time.Minute, "os-node3: its node up again in dbcanary_store_node_up")
	upAgain := time.Since(t1)
	stack.Figure(t, "OpenSearch, one address per target, node 3's proxy disabled (connections refused): os-node3's dbcanary_store_node_up 0 after %s (GET / every 30 s), the other targets' 1; os-node3's ops failed %v, target_up %v; proxy enabled: every op succeeded again within %s, the gauge 1 again after %s (the next check)",
		seen.Round(100*time.Millisecond), diff(slowed["os-node3"].causes, cut.causes), cut.up, back.at.Sub(t1).Round(100*time.Millisecond), upAgain.Round(100*time.Millisecond))
}
