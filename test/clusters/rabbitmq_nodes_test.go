//go:build integration

package clusters

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/stack"
)

// rabbitmqNodesConfig is a daemon config with one target given the three
// nodes as urls, a queue of queueType, the shipped timeouts and
// node_check_interval (30s); publish at 4/s; loss_timeout 5s (so that a
// message lost in a phase is counted within it); extra is appended to the
// rabbitmq section.
func rabbitmqNodesConfig(t *testing.T, target, queueType, extra string) string {
	t.Helper()
	urls := strings.Split(rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_URLS"), ",")
	return fmt.Sprintf(`global:
  state_dir: %s
targets:
  - name: %s
    backend: rabbitmq
    ops: {publish: {rate: 4}, consume: {}}
    rabbitmq:
      urls: [%s]
      username: %s
      password_file: %s
      queue_type: %s
      loss_timeout: 5s
%s`, t.TempDir(), target, strings.Join(urls, ", "), rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"),
		rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"), queueType, extra)
}

// rabbitmqAddr is node i's host:port, the node label of dbcanary_store_node_up.
func rabbitmqAddr(t *testing.T, i int) string {
	t.Helper()
	u, err := url.Parse(strings.Split(rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_URLS"), ",")[i-1])
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// rabbitmqNodesUp is dbcanary_store_node_up of the three nodes, with those
// in down at 0.
func rabbitmqNodesUp(t *testing.T, down ...int) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for i := 1; i <= 3; i++ {
		m[rabbitmqAddr(t, i)] = 1
		if slices.Contains(down, i) {
			m[rabbitmqAddr(t, i)] = 0
		}
	}
	return m
}

// connectedNode is the cluster node (1-based) the daemon's log last says it connected to.
func (d *daemon) connectedNode(t *testing.T) int {
	t.Helper()
	var nodes []string
	enginetest.WaitFor(t, 30*time.Second, "the log to name the node connected to", func() bool {
		nodes = d.connectedNodes()
		return len(nodes) > 0
	})
	return nodeOf(t, nodes[len(nodes)-1])
}

var queuePid = regexp.MustCompile(`^(\S+)\s+<(.+)\.\d+\.\d+\.\d+>$`)

// canaryQueue is the target's canary queue as /status.json names it.
func (d *daemon) canaryQueue(t *testing.T, target string) string {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Targets []struct{ Name, Namespace string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	for _, tg := range snap.Targets {
		if q, ok := strings.CutPrefix(tg.Namespace, "queue "); ok && tg.Name == target {
			return q
		}
	}
	t.Fatalf("status.json names no queue for target %s", target)
	return ""
}

// queueHome is the node (1-based) whose Erlang process holds the queue (a
// classic queue's home node), as rabbitmqctl list_queues on node via says;
// 0 if it lists none.
func queueHome(t *testing.T, via int, queue string) int {
	t.Helper()
	pidfile := rabbitmq.Get(t, fmt.Sprintf("DBCANARY_TEST_RABBITMQ_NODE%d_PIDFILE", via))
	cmd := exec.Command("/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", rabbitmq.Get(t, fmt.Sprintf("DBCANARY_TEST_RABBITMQ_NODE%d_NAME", via)),
		"list_queues", "--quiet", "--no-table-headers", "name", "pid")
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(filepath.Dir(pidfile), "home"), "ERL_EPMD_ADDRESS=127.0.0.1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl list_queues: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		m := queuePid.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[1] != queue {
			continue
		}
		for i := 1; i <= 3; i++ {
			if rabbitmq.Get(t, fmt.Sprintf("DBCANARY_TEST_RABBITMQ_NODE%d_NAME", i)) == m[2] {
				return i
			}
		}
		t.Fatalf("queue %s on unknown node %s", m[1], m[2])
	}
	return 0
}

// nodeDownLog matches the daemon's log line that says node addr is down.
func nodeDownLog(addr string) *regexp.Regexp {
	return regexp.MustCompile(`msg="RabbitMQ node is down"[^\n]*? node=` + regexp.QuoteMeta(addr) + ` `)
}

// TestRabbitMQNodeDownWarning is "a node down while the target serves" for
// RabbitMQ (issue 21 item 4): one target given the three nodes as urls, a
// quorum queue. A node the probe is not connected to killed with SIGKILL:
// the background check (node_check_interval, shipped 30s) puts its
// dbcanary_store_node_up at 0, the other two stay 1, no op fails, and
// DbcanaryStoreNodeDown fires naming it (rules time-scaled 0.05: for: 5m ->
// 15s) with no critical alert. Restarted: 1 again, the warning resolves.
func TestRabbitMQNodeDownWarning(t *testing.T) {
	rabbitmq = useCluster(t, "rabbitmq-cluster")
	const target = "rabbitmq-nodes"
	ops := []string{"publish", "consume"}
	d := startDaemon(t, rabbitmqNodesConfig(t, target, "quorum", ""))
	al := startAlerting(t, d.addr)
	start := d.snap(t, target)
	d.waitOK(t, target, start, ops, 20, 3*time.Minute, "20 publishes and consumes on the healthy cluster")
	al.waitScraped(t, target)
	d.waitNodes(t, target, rabbitmqNodesUp(t), 2*time.Minute, "the three nodes up in dbcanary_store_node_up")
	connected := d.connectedNode(t)
	killed := connected%3 + 1 // a node the probe is not connected to
	addr := rabbitmqAddr(t, killed)

	before := d.snap(t, target)
	pre := al.firing(t, "critical")
	t0 := time.Now()
	rabbitmqNode(killed).kill9(t)
	// Even if the test fails: a cluster stopped with a node already dead
	// does not start again until the last node down starts first.
	t.Cleanup(func() { restartCluster(t, "rabbitmq-cluster") })
	down := rabbitmqNodesUp(t, killed)
	d.waitNodes(t, target, down, 3*time.Minute, fmt.Sprintf("node %d down, the others up in dbcanary_store_node_up", killed))
	seen := time.Since(t0)
	fired := al.waitNodeAlert(t, target, []string{addr}, 3*time.Minute)
	firedAfter := time.Since(t0)
	after := d.snap(t, target)
	if got := d.nodes(t, target); !mapsEqual(got, down) {
		t.Errorf("dbcanary_store_node_up with node %d down: %v, want %v", killed, got, down)
	}
	crit, warn := al.firedSince(t, "critical", t0), al.firedSince(t, "warning", t0)
	stack.Figure(t, "RabbitMQ 3 nodes, quorum queue, urls of the 3 nodes (connected to node %d), node %d kill -9: dbcanary_store_node_up{node=%s} 0 after %s (node_check_interval 30s; the others 1); %s firing %s after the kill (rules time-scaled 0.05: for: 5m -> 15s), summary %q; %v ok publishes and %v ok consumes, failures %v; dbcanary_target_up %v; critical alerts %v (firing before: %v), warnings %v",
		connected, killed, addr, seen.Round(100*time.Millisecond), generate.AlertStoreNodeDown, firedAfter.Round(time.Second), fired["summary"],
		after.ok["publish"]-before.ok["publish"], after.ok["consume"]-before.ok["consume"], diff(before.causes, after.causes), after.up, crit, pre, warn)
	if !strings.Contains(fired["summary"], addr) || !strings.Contains(fired["summary"], target) || !strings.Contains(fired["summary"], "rabbitmq") {
		t.Errorf("%s does not name node %s and target %s: %v", generate.AlertStoreNodeDown, addr, target, fired)
	}
	if f := diff(before.causes, after.causes); len(f) > 0 {
		t.Errorf("ops failed with a node the canary is not connected to down: %v", f)
	}
	if after.ok["publish"]-before.ok["publish"] < 10 {
		t.Errorf("%v publishes succeeded while the node was down, want ops to go on", after.ok["publish"]-before.ok["publish"])
	}
	if after.up != 1 {
		t.Errorf("dbcanary_target_up = %v with one node down, want 1", after.up)
	}
	if n := minus(crit, pre); len(n) > 0 {
		t.Errorf("one node of three down paged: %v; %s is a warning", n, generate.AlertStoreNodeDown)
	}
	al.pageRow(t, "rabbitmq", target, fmt.Sprintf("node %d, not the connected one, `kill -9` (`urls:` of the three, quorum queue), held past the warning's `for:`: dbcanary_store_node_up{node=%q} 0 after %s (the next check); %s firing %s after the kill (`for:` scaled to 15 s); %v failed",
		killed, addr, seen.Round(100*time.Millisecond), generate.AlertStoreNodeDown, firedAfter.Round(time.Second), total(diff(before.causes, after.causes))),
		"no page; DbcanaryStoreNodeDown (ticket) naming the node", t0, pre, nil)
	if !nodeDownLog(addr).MatchString(d.logs.String()) {
		t.Errorf("the log does not say node %s is down", addr)
	}

	took := restartCluster(t, "rabbitmq-cluster")
	t1 := time.Now()
	d.waitNodes(t, target, rabbitmqNodesUp(t), 3*time.Minute, fmt.Sprintf("node %d up again in dbcanary_store_node_up", killed))
	upAgain := time.Since(t1)
	enginetest.WaitFor(t, 3*time.Minute, generate.AlertStoreNodeDown+" to resolve", func() bool {
		return len(al.query(t, `ALERTS{alertname="`+generate.AlertStoreNodeDown+`"}`)) == 0
	})
	resolved := time.Since(t1)
	end := d.snap(t, target)
	stack.Figure(t, "RabbitMQ 3 nodes, node %d back (restarted in %s): dbcanary_store_node_up 1 again %s after the restart, %s resolved %s after it; failures since the kill %v; critical alerts since the kill %v",
		killed, took.Round(100*time.Millisecond), upAgain.Round(100*time.Millisecond), generate.AlertStoreNodeDown, resolved.Round(time.Second),
		diff(before.causes, end.causes), minus(al.firedSince(t, "critical", t0), pre))
	if f := diff(before.causes, end.causes); len(f) > 0 {
		t.Errorf("ops failed while the node was down or coming back: %v", f)
	}
	if n := len(nodeDownLog(addr).FindAllString(d.logs.String(), -1)); n != 1 {
		t.Errorf("node %s down logged %d times, want once", addr, n)
	}
}

// TestRabbitMQClassicQueue is issue 21's "classic queue for comparison": the
// daemon as in TestRabbitMQNodeDownWarning but with queue_type: classic. A
// classic queue lives on the node that declared it (the connected one, with
// the default leader locator): that node killed with SIGKILL, no other node
// can serve the queue. The canary reports it as cause server naming the
// queue's home node as down and pointing at quorum queues (not not_found,
// which would page as data loss), DbcanaryTargetDown is the one page, and
// the restart brings the queue and its messages back (none lost). The
// quorum queue in the same fault pages nothing (TestRabbitMQURLsFailover).
func TestRabbitMQClassicQueue(t *testing.T) {
	rabbitmq = useCluster(t, "rabbitmq-cluster")
	const target = "rabbitmq-classic"
	ops := []string{"publish", "consume"}
	// A queue of this run's own: one left by an earlier run (x-expires 30m)
	// would keep the home node it was declared on.
	d := startDaemon(t, rabbitmqNodesConfig(t, target, "classic", fmt.Sprintf("      queue_prefix: dbcanary.%s.%d\n", target, time.Now().UnixNano())))
	al := startAlerting(t, d.addr)
	d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 publishes and consumes on the healthy cluster")
	al.waitScraped(t, target)
	connected := d.connectedNode(t)
	queue := d.canaryQueue(t, target)
	home := queueHome(t, connected, queue)
	if home == 0 {
		t.Fatalf("rabbitmqctl lists no queue %s", queue)
	}
	if home != connected {
		t.Errorf("the classic queue is on node %d, the connection on node %d: want the declaring node (client-local)", home, connected)
	}

	before := d.snap(t, target)
	pre := al.firing(t, "critical")
	t0 := time.Now()
	rabbitmqNode(home).kill9(t)
	t.Cleanup(func() { restartCluster(t, "rabbitmq-cluster") })
	// The connected node's gauge follows its connection, not the checks.
	enginetest.WaitFor(t, 3*time.Minute, fmt.Sprintf("node %d at 0 in dbcanary_store_node_up", home), func() bool {
		v, ok := d.nodes(t, target)[rabbitmqAddr(t, home)]
		return ok && v == 0
	})
	gaugeDown := time.Since(t0)
	var fired time.Duration
	waitTargetDown(t, al, d, target, before, 3*time.Minute, func() { fired = time.Since(t0) })
	// Let the outage run for 10 more failed publishes: the steady error,
	// not only the one at the kill.
	var down snapshot
	enginetest.WaitFor(t, 3*time.Minute, "10 more failed publishes", func() bool {
		down = d.snap(t, target)
		return down.failed["publish"]-before.failed["publish"] >= 10
	})
	crit := al.firedSince(t, "critical", t0)
	warn := al.firedSince(t, "warning", t0)
	// publish's error (consume's says the same behind "consumer not connected").
	var latest string
	for _, e := range d.statusErrors(t, target) {
		if strings.HasPrefix(e, "rabbitmq: no node of the 3 in urls could be used") {
			latest = e
			break
		}
	}
	nodes := d.nodes(t, target)
	stack.Figure(t, "RabbitMQ 3 nodes, classic queue, urls of the 3 nodes, node %d (the queue's home and the connected node) kill -9: its dbcanary_store_node_up 0 after %s; DbcanaryTargetDown firing %s after the kill (rules time-scaled 0.05); failures %v; dbcanary_target_up %v; dbcanary_store_node_up %v; critical alerts %v, pages after the shipped inhibition %v (firing before: %v), warnings %v; latest publish error %q",
		home, gaugeDown.Round(100*time.Millisecond), fired.Round(time.Second), diff(before.causes, down.causes), down.up, nodes, crit, pages(minus(crit, pre), target), pre, warn, latest)
	if got := pages(minus(crit, pre), target); !slices.Equal(got, []string{"DbcanaryTargetDown{target=" + target + "}"}) {
		t.Errorf("pages with the classic queue's node down: %v (critical alerts %v), want DbcanaryTargetDown alone", got, crit)
	}
	al.pageRow(t, "rabbitmq", target, fmt.Sprintf("node %d, the **classic** queue's node and the connected one, `kill -9` (`urls:` of the three): failures %v (cause server: the queue's home node is down); DbcanaryTargetDown firing %s after the kill",
		home, diff(before.causes, down.causes), fired.Round(time.Second)),
		"DbcanaryTargetDown alone, no data-loss page (a classic queue lives on one node)", t0, pre, []string{"DbcanaryTargetDown{target=" + target + "}"})
	if n := diff(before.causes, down.causes)["publish/server"]; n == 0 {
		t.Errorf("no publish failed with cause server: %v", diff(before.causes, down.causes))
	}
	for _, c := range []string{"not_found", "lost", "mismatch"} {
		if n := diff(before.causes, down.causes)["consume/"+c] + diff(before.causes, down.causes)["publish/"+c]; n > 0 {
			t.Errorf("%v failures with cause %s (a data-integrity cause) with the queue's node down: %v", n, c, diff(before.causes, down.causes))
		}
	}
	homeName := rabbitmq.Get(t, fmt.Sprintf("DBCANARY_TEST_RABBITMQ_NODE%d_NAME", home))
	if e := latest; !strings.Contains(e, "home node") || !strings.Contains(e, homeName) || !strings.Contains(e, "use queue_type: quorum") {
		t.Errorf("the latest error does not say the queue's home node %s is down and hint at quorum queues: %q", homeName, e)
	}
	if nodes[rabbitmqAddr(t, home)] != 0 {
		t.Errorf("dbcanary_store_node_up of the killed node %d: %v", home, nodes)
	}

	took := restartCluster(t, "rabbitmq-cluster")
	t1 := time.Now()
	back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after the queue's node is back")
	var cleared time.Duration
	waitQuiet(t, al, 3*time.Minute, pre, func() { cleared = time.Since(t1) })
	// Messages confirmed before the kill wait on the home node's disk: they
	// come back with it; time disconnected does not count towards loss_timeout.
	lossCheck := d.waitOK(t, target, back, ops, 30, 3*time.Minute, "30 more successes (more than loss_timeout of connected time)")
	stack.Figure(t, "RabbitMQ classic queue, node %d back (restarted in %s): ops succeed again %s after the restart, no critical alert firing %s after it; failures while coming back %v; consume/lost %v since the kill (loss_timeout 5s)",
		home, took.Round(100*time.Millisecond), back.at.Sub(t1).Round(time.Second), cleared.Round(time.Second),
		diff(down.causes, back.causes), diff(before.causes, lossCheck.causes)["consume/lost"])
	if n := diff(before.causes, lossCheck.causes)["consume/lost"]; n > 0 {
		t.Errorf("%v confirmed messages counted lost across the classic queue's node restart", n)
	}
}

// TestRabbitMQWhichNode is "which node" of issue 21 for RabbitMQ: one target
// per node, each with that node alone as url, reached through a proxy of its
// own (client <-> node; the nodes talk to each other directly), quorum
// queues. With node 3's proxy slowed (+3 x the healthy mean publish latency
// on every answer: x4), node 3's target's publish latency rises and nodes 1
// and 2's do not, and no op fails: the slow node is named by its target.
func TestRabbitMQWhichNode(t *testing.T) {
	rabbitmq = useCluster(t, "rabbitmq-cluster")
	tp := startToxiproxy(t)
	var targets, names []string
	proxies := map[string]*toxiproxy.Proxy{}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("mq-node%d", i)
		names = append(names, name)
		listen := net.JoinHostPort("127.0.0.1", fmt.Sprint(stack.FreePort(t)))
		p, err := tp.CreateProxy(fmt.Sprintf("rabbitmq-node%d", i), listen, rabbitmqAddr(t, i))
		if err != nil {
			t.Fatal(err)
		}
		proxies[name] = p
		targets = append(targets, fmt.Sprintf(`  - name: %s
    backend: rabbitmq
    labels: {node: %q}
    ops: {publish: {rate: 4}, consume: {}}
    rabbitmq:
      url: amqp://%s/
      username: %s
      password_file: %s
      queue_type: quorum
`, name, rabbitmqAddr(t, i), listen, rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE")))
	}
	d := startDaemon(t, fmt.Sprintf("global:\n  state_dir: %s\ntargets:\n%s", t.TempDir(), strings.Join(targets, "")))
	al := startAlerting(t, d.addr)
	ops := []string{"publish", "consume"}
	base := map[string]snapshot{}
	for _, n := range names {
		base[n] = d.waitOK(t, n, d.snap(t, n), ops, 20, 3*time.Minute, n+": 20 publishes and consumes on the healthy cluster")
	}
	ref := map[string]snapshot{}
	for _, n := range names {
		ref[n] = d.waitOK(t, n, base[n], ops, 20, 3*time.Minute, n+": 20 more before the slowdown")
	}
	healthy := time.Duration(0)
	for _, n := range names {
		healthy = max(healthy, meanOK(base[n], ref[n], "publish"))
	}
	// 3 x the healthy mean (x4 in all), within 5-250 ms, in whole ms (the
	// toxic's unit): a publish confirm takes a few ms on a quiet machine.
	added := min(max(3*healthy, 5*time.Millisecond), 250*time.Millisecond).Round(time.Millisecond)
	slow := proxies["mq-node3"]
	if _, err := slow.AddToxic("slow", "latency", "downstream", 1, toxiproxy.Attributes{"latency": added.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.RemoveToxic("slow") })
	tSlow, pre := time.Now(), al.firing(t, "critical")
	before := map[string]snapshot{}
	for _, n := range names {
		before[n] = d.snap(t, n)
	}
	shift, _, figs := slowNodeShift(t, d, names, ops, []string{"publish"}, 30, base, ref, before)
	stack.Figure(t, "RabbitMQ 3 nodes, one target per node (url through the node's own proxy), quorum queues, node 3 slowed (+%s per answer, healthy mean publish %s): mean latency %s",
		added, healthy.Round(100*time.Microsecond), figs)
	al.pageRow(t, "rabbitmq", "mq-node3", fmt.Sprintf("node 3 slowed ×4 (toxiproxy +%s on its answers), one target per node: mq-node3's mean publish up %s, the others' %s and %s",
		added, shift["mq-node3"].Round(100*time.Microsecond), shift["mq-node1"].Round(100*time.Microsecond), shift["mq-node2"].Round(100*time.Microsecond)),
		"no page at production latencies (the slow node named by its target's latency)", tSlow, pre, nil)
	checkSlowNode(t, names, shift, added, "mean publish latency")
}
