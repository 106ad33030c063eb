//go:build integration

package clusters

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/internal/enginetest"

	"github.com/dbcanary/dbcanary/test/stack"
)

// cassandraConfig is a daemon config with one target on the whole cluster:
// every contact point, NetworkTopologyStrategy RF 3, the shipped consistency
// levels (LOCAL_QUORUM) and timeouts; only the rates are raised above the
// shipped ones so that a phase of the test holds enough samples.
func cassandraConfig(t *testing.T, target, keyspace, ops, extra string) string {
	t.Helper()
	hosts := strings.Split(cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_HOSTS"), ",")
	return fmt.Sprintf(`global:
  state_dir: %s
targets:
  - name: %s
    backend: cassandra
    ops: {%s}
    cassandra:
      hosts: [%s]
      port: %s
      local_dc: %s
      keyspace: %s
      replication: {class: NetworkTopologyStrategy, datacenters: {%s: 3}}
%s`, t.TempDir(), target, ops, strings.Join(hosts, ", "), cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"),
		cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_DC"), keyspace, cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_DC"), extra)
}

func cassandraNode(i int) clusterNode {
	return clusterNode{script: "cassandra-cluster", env: cassandra, store: "CASSANDRA", i: i}
}

// TestCassandraNodeFaults: the daemon probes the 3-node cluster (RF 3,
// LOCAL_QUORUM) while nodes fail, and a private Prometheus evaluates the
// generated rules (time-scaled) on its metrics:
//   - node 1 (the first contact point) killed with SIGKILL: after the ops in
//     flight at the kill, every op succeeds and no critical alert fires;
//   - node 3 slowed x4 through toxiproxy: every op succeeds, and no critical
//     alert fires but the latency page (whose thresholds are absolute);
//   - nodes 1 and 2 killed: ops fail, DbcanaryTargetDown fires and it is the
//     only critical alert;
//   - both back: ops succeed again and no critical alert is left firing.
func TestCassandraNodeFaults(t *testing.T) {
	cassandra = useCluster(t, "cassandra-cluster")
	const target = "cassandra-cluster"
	ops := []string{"insert", "read"}
	d := startDaemon(t, cassandraConfig(t, target, "dbcanary_clusters", "insert: {rate: 4}, read: {rate: 4}", ""))
	al := startAlerting(t, d.addr)
	start := d.snap(t, target)
	healthy := d.waitOK(t, target, start, ops, 20, 3*time.Minute, "20 successful inserts and reads on the healthy cluster")
	al.waitScraped(t, target)
	t.Logf("healthy (keyspace and table created): failures %v", diff(start.causes, healthy.causes))

	phase := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow() // the next phase starts from this one's cluster state
		}
	}

	phase("one node kill -9", func(t *testing.T) {
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		t0 := time.Now()
		cassandraNode(1).kill9(t)
		// Ops in flight on the killed node's connections may fail; once each
		// op has succeeded 10 times after the kill the driver has moved on,
		// and from there on nothing may fail.
		settled := d.waitOK(t, target, before, ops, 10, 3*time.Minute, "10 successes of each op after the kill")
		after := d.waitOK(t, target, settled, ops, 40, 3*time.Minute, "40 more successes of each op with one node down")
		crit, warn := al.firedSince(t, "critical", t0), al.firedSince(t, "warning", t0)
		stack.Figure(t, "Cassandra 3 nodes, RF 3, LOCAL_QUORUM, node 1 (first contact point) kill -9: failures at the kill %v, then %v ok inserts and %v ok reads with %v failures over %s; critical alerts %v (firing before: %v), warnings %v",
			diff(before.causes, settled.causes), after.ok["insert"]-settled.ok["insert"], after.ok["read"]-settled.ok["read"],
			total(diff(settled.causes, after.causes)), after.at.Sub(settled.at).Round(time.Second), crit, pre, warn)
		if f := diff(settled.causes, after.causes); len(f) > 0 {
			t.Errorf("with one node of three down, ops at LOCAL_QUORUM failed: %v", f)
		}
		if n := minus(crit, pre); len(n) > 0 {
			t.Errorf("one node of three down fired critical alerts: %v", n)
		}
		if after.up != 1 {
			t.Errorf("dbcanary_target_up = %v with one node down, want 1", after.up)
		}
		al.pageRow(t, "cassandra", target, fmt.Sprintf("node 1 (the first contact point) `kill -9`, RF 3 at LOCAL_QUORUM; %v failed at the kill, then %v ops ok and %v failed over %s",
			total(diff(before.causes, settled.causes)), total(diff(settled.ok, after.ok)), total(diff(settled.causes, after.causes)), after.at.Sub(settled.at).Round(time.Second)),
			"no page", t0, pre, nil)
		took := restartCluster(t, "cassandra-cluster")
		back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after node 1 is back")
		t.Logf("node 1 restarted in %s; failures while it came back: %v", took.Round(100*time.Millisecond), diff(after.causes, back.causes))
	})

	phase("one node slowed x4", func(t *testing.T) {
		tp := toxiproxy.NewClient(cassandra.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
		proxy, err := tp.Proxy(cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_NODE3_PROXY"))
		if err != nil {
			t.Fatal(err)
		}
		// The node's answers take 3 times the healthy mean op latency longer:
		// an op it coordinates takes about 4 times as long.
		base := d.snap(t, target)
		ref := d.waitOK(t, target, base, ops, 20, 3*time.Minute, "20 successes of each op before the slowdown")
		healthyMean := max(meanOK(base, ref, "insert"), meanOK(base, ref, "read"))
		added := max(3*healthyMean, time.Millisecond)
		if _, err := proxy.AddToxic("slow", "latency", "downstream", 1, toxiproxy.Attributes{"latency": added.Milliseconds()}); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		removed := false
		remove := func() {
			if !removed {
				removed = true
				if err := proxy.RemoveToxic("slow"); err != nil {
					t.Errorf("remove toxic: %v", err)
				}
			}
		}
		t.Cleanup(remove)
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		after := d.waitOK(t, target, before, ops, 60, 3*time.Minute, "60 successes of each op with node 3 slowed")
		crit, warn := al.firedSince(t, "critical", t0), al.firedSince(t, "warning", t0)
		al.pageRow(t, "cassandra", target, fmt.Sprintf("node 3 slowed ×4 (toxiproxy +%s on its answers); mean insert %s → %s, read %s → %s; %v failed",
			added, meanOK(base, ref, "insert").Round(100*time.Microsecond), meanOK(before, after, "insert").Round(100*time.Microsecond),
			meanOK(base, ref, "read").Round(100*time.Microsecond), meanOK(before, after, "read").Round(100*time.Microsecond), total(diff(before.causes, after.causes))),
			"no page at production latencies (LatencyAboveBaseline only if ×4 crosses the reference's absolute p99)", t0, pre, nil)
		remove()
		stack.Figure(t, "Cassandra 3 nodes, node 3 slowed (+%s per answer, healthy mean op latency %s): mean latency insert %s -> %s, read %s -> %s; failures %v; critical alerts %v, warnings %v",
			added, healthyMean.Round(10*time.Microsecond), meanOK(base, ref, "insert").Round(10*time.Microsecond), meanOK(before, after, "insert").Round(10*time.Microsecond),
			meanOK(base, ref, "read").Round(10*time.Microsecond), meanOK(before, after, "read").Round(10*time.Microsecond), diff(before.causes, after.causes), crit, warn)
		if f := diff(before.causes, after.causes); len(f) > 0 {
			t.Errorf("with one node slowed, ops failed: %v", f)
		}
		// Slowness pages as slowness or not at all: the latency thresholds
		// are absolute (the reference's p99, docs/clusters.md), so whether a
		// node 4 times slower crosses them depends on the healthy latency.
		for _, a := range crit {
			if !strings.HasPrefix(a, "DbcanaryLatencyAboveBaseline{") {
				t.Errorf("one node slowed fired critical alert %s; only the latency page may fire", a)
			}
		}
	})

	phase("second node down, then both back", func(t *testing.T) {
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		t0 := time.Now()
		cassandraNode(1).kill9(t)
		cassandraNode(2).kill9(t)
		var fired time.Duration
		waitTargetDown(t, al, d, target, before, 3*time.Minute, func() { fired = time.Since(t0) })
		down := d.snap(t, target)
		crit := al.firedSince(t, "critical", t0)
		stack.Figure(t, "Cassandra 3 nodes, nodes 1 and 2 kill -9: DbcanaryTargetDown firing %s after the kill (rules time-scaled 0.05: for: 2m -> 6s); failures %v; dbcanary_target_up %v; critical alerts %v, pages after the shipped inhibition %v",
			fired.Round(time.Second), diff(before.causes, down.causes), down.up, crit, pages(crit, target))
		if down.up != 0 {
			t.Errorf("dbcanary_target_up = %v with two nodes of three down, want 0", down.up)
		}
		al.pageRow(t, "cassandra", target, fmt.Sprintf("nodes 1 and 2 `kill -9` (two of three): failures %v; DbcanaryTargetDown firing %s after the kill (`for:` scaled to 6 s)",
			diff(before.causes, down.causes), fired.Round(time.Second)),
			"DbcanaryTargetDown alone", t0, pre, []string{"DbcanaryTargetDown{target=" + target + "}"})
		// The errors name the node that coordinated each failed op (the
		// status page and /status.json show them).
		msgs := d.statusErrors(t, target)
		named := 0
		for _, m := range msgs {
			if strings.Contains(m, "(coordinator") {
				named++
			}
		}
		stack.Figure(t, "Cassandra 3 nodes, nodes 1 and 2 kill -9: %d of the %d recent error messages on the status page name a coordinator; e.g. %q", named, len(msgs), first(msgs))
		if named == 0 {
			t.Errorf("no failed op's error names its coordinator: %q", msgs)
		}
		// One fault, one page: what the shipped Alertmanager inhibition
		// leaves of the critical alerts is DbcanaryTargetDown alone.
		if got := pages(crit, target); !slices.Equal(got, []string{"DbcanaryTargetDown{target=" + target + "}"}) {
			t.Errorf("pages with two nodes down: %v (critical alerts %v), want DbcanaryTargetDown alone (one fault, one page)", got, crit)
		}

		took := restartCluster(t, "cassandra-cluster")
		t1 := time.Now()
		back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after both nodes are back")
		var cleared time.Duration
		waitQuiet(t, al, 3*time.Minute, pre, func() { cleared = time.Since(t1) })
		stack.Figure(t, "Cassandra 3 nodes, nodes 1 and 2 back (restarted in %s): ops succeed again after %s, no critical alert firing %s after the restart; dbcanary_target_up %v",
			took.Round(100*time.Millisecond), back.at.Sub(t1).Round(time.Second), cleared.Round(time.Second), d.snap(t, target).up)
	})
}

// waitQuiet waits until no critical alert fires but those in before (the
// ones firing before the fault: on a loaded machine the healthy latency can
// sit above the reference's absolute p99), then calls at.
func waitQuiet(t *testing.T, al *alerting, timeout time.Duration, before []string, at func()) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for c := minus(al.firing(t, "critical"), before); len(c) > 0; c = minus(al.firing(t, "critical"), before) {
		if time.Now().After(deadline) {
			t.Fatalf("critical alerts still firing %s after recovery: %v", timeout, c)
		}
		time.Sleep(200 * time.Millisecond)
	}
	at()
}

// TestCassandraLedgerNodeLoss is issue 21's ledger proof: ledger rows written
// and acknowledged at QUORUM while node 2 is killed with SIGKILL and started
// again are all read back intact at QUORUM (zero missing). The rows are
// checked at 45s, so those written before the kill are checked after the node
// is back, with the unsynced part of its commit log gone.
func TestCassandraLedgerNodeLoss(t *testing.T) {
	cassandra = useCluster(t, "cassandra-cluster")
	const target = "cassandra-ledger"
	d := startDaemon(t, cassandraConfig(t, target, "dbcanary_clusters_ledger",
		"ledger_write: {rate: 2}, ledger_check: {rate: 2}",
		"      consistency: {ledger_write: QUORUM, ledger_check: QUORUM}\n      ledger: {ages: [45s]}\n"))
	start := d.snap(t, target)
	beforeKill := d.waitOK(t, target, start, []string{"ledger_write"}, 20, 3*time.Minute, "20 ledger writes acknowledged")
	cassandraNode(2).kill9(t)
	t0 := time.Now()
	took := restartCluster(t, "cassandra-cluster")
	t.Logf("node 2 killed and started again in %s", took.Round(100*time.Millisecond))
	// Rows written after the restart as well, then every row written so far
	// is checked once it is 45s old.
	end := d.waitOK(t, target, d.snap(t, target), []string{"ledger_write"}, 10, 3*time.Minute, "10 ledger writes after the restart")
	written := end.ok["ledger_write"] - start.ok["ledger_write"]
	var got snapshot
	enginetest.WaitFor(t, 5*time.Minute, "every acknowledged ledger row checked", func() bool {
		got = d.snap(t, target)
		return total(got.ledger)-total(start.ledger) >= written
	})
	checks := diff(start.ledger, got.ledger)
	stack.Figure(t, "Cassandra ledger, 3 nodes RF 3, %v rows acknowledged at QUORUM (%v before node 2's kill -9, the rest while it was down and after it was back %s later), checked at QUORUM at 45s: missing %v, intact %v, corrupted %v; ledger_write failures %v",
		written, beforeKill.ok["ledger_write"]-start.ok["ledger_write"], time.Since(t0).Round(time.Second),
		checks["missing"], checks["intact"], checks["corrupted"], diff(start.causes, got.causes))
	if checks["missing"] != 0 || checks["corrupted"] != 0 || checks["intact"] < written {
		t.Errorf("ledger checks %v after a one-node kill -9, want all %v acknowledged rows intact", checks, written)
	}
}

// TestCassandraLedgerOneReplicaLoss is the other half of issue 21's ledger
// proof: ledger rows acknowledged at ONE by node 1 while nodes 2 and 3 are
// down, hinted handoff off (so each row is on node 1 alone, as when the others
// stayed down past max_hint_window) and node 1's commit log the existing
// proof's (periodic 120s, LZ4-compressed: buffered in the process until each
// sync), are gone after node 1's kill -9 and the cluster's restart: the ledger
// reports them missing, every other row intact, and DbcanaryDurabilityLoss
// fires on the private Prometheus.
func TestCassandraLedgerOneReplicaLoss(t *testing.T) {
	cassandra = useCluster(t, "cassandra-cluster")
	const target = "cassandra-ledger-one"
	lossy := []string{"DBCANARY_CASSANDRA_COMMITLOG_SYNC=periodic", "DBCANARY_CASSANDRA_COMMITLOG_SYNC_PERIOD=120000ms",
		"DBCANARY_CASSANDRA_COMMITLOG_COMPRESSION=LZ4Compressor", "DBCANARY_CASSANDRA_HINTED_HANDOFF=false"}
	// Node 1 restarts with the lossy settings; it gets the defaults back at
	// the cluster's next start, which the test ends with.
	clusterScript(t, "cassandra-cluster", nil, "stop-node", "1")
	restartCluster(t, "cassandra-cluster", lossy...)
	t.Cleanup(func() { restartCluster(t, "cassandra-cluster") })

	d := startDaemon(t, cassandraConfig(t, target, "dbcanary_clusters_ledger_one",
		"ledger_write: {rate: 2}, ledger_check: {rate: 2}",
		"      consistency: {ledger_write: ONE, ledger_check: ONE}\n      ledger: {ages: [30s]}\n"))
	al := startAlerting(t, d.addr)
	start := d.snap(t, target)
	d.waitOK(t, target, start, []string{"ledger_write"}, 10, 3*time.Minute, "10 ledger writes on the whole cluster")
	al.waitScraped(t, target)
	pre := d.snap(t, target)
	cassandraNode(2).kill9(t)
	cassandraNode(3).kill9(t)
	alone := d.snap(t, target)
	onNode1 := d.waitOK(t, target, alone, []string{"ledger_write"}, 20, 3*time.Minute, "20 ledger writes acknowledged by node 1 alone")
	cassandraNode(1).kill9(t)
	killed := d.snap(t, target)
	took := restartCluster(t, "cassandra-cluster")
	t.Logf("node 1 killed, the three nodes started again in %s", took.Round(100*time.Millisecond))
	end := d.waitOK(t, target, d.snap(t, target), []string{"ledger_write"}, 10, 3*time.Minute, "10 ledger writes after the restart")
	written := end.ok["ledger_write"] - start.ok["ledger_write"]
	var got snapshot
	enginetest.WaitFor(t, 5*time.Minute, "every acknowledged ledger row checked", func() bool {
		got = d.snap(t, target)
		return total(got.ledger)-total(start.ledger) >= written
	})
	checks := diff(start.ledger, got.ledger)
	stack.Figure(t, "Cassandra ledger, 3 nodes RF 3, hinted handoff off, node 1 commitlog periodic (120s) LZ4: %v rows acknowledged at ONE (%v by node 1 alone, nodes 2 and 3 killed), node 1 kill -9, cluster restarted: missing %v, intact %v, corrupted %v",
		written, killed.ok["ledger_write"]-alone.ok["ledger_write"], checks["missing"], checks["intact"], checks["corrupted"])
	// Rows acknowledged from just before nodes 2 and 3 went may be on node 1 alone too.
	if checks["missing"] == 0 || checks["missing"] > killed.ok["ledger_write"]-pre.ok["ledger_write"] || checks["corrupted"] != 0 ||
		checks["missing"]+checks["intact"] != written {
		t.Errorf("ledger checks %v: want some of the %v rows node 1 alone acknowledged missing, every other of the %v intact",
			checks, onNode1.ok["ledger_write"]-alone.ok["ledger_write"], written)
	}
	// The missing rows were counted as their checks came due, some of them
	// minutes ago: the page is looked for in every evaluation since the kill.
	if checks["missing"] > 0 {
		alert := "DbcanaryDurabilityLoss{target=" + target + "}"
		enginetest.WaitFor(t, 2*time.Minute, alert+" fired since the kill", func() bool {
			return slices.Contains(al.firedSince(t, "critical", killed.at), alert)
		})
		stack.Figure(t, "Cassandra ledger, ONE and node 1 kill -9: critical alerts fired since the kill: %v", al.firedSince(t, "critical", killed.at))
	}
}

// TestCassandraFirstContactDownAtStart (issue 21 item 5, Cassandra): with
// the first contact point killed before dbcanary starts, `dbcanary once`
// connects through the others and every op succeeds at LOCAL_QUORUM.
func TestCassandraFirstContactDownAtStart(t *testing.T) {
	cassandra = useCluster(t, "cassandra-cluster")
	cassandraNode(1).kill9(t)
	t.Cleanup(func() { restartCluster(t, "cassandra-cluster") })
	file := filepath.Join(t.TempDir(), "dbcanary.yaml")
	if err := os.WriteFile(file, []byte(cassandraConfig(t, "cassandra-first-down", "dbcanary_clusters", "insert: {rate: 1}, read: {rate: 1}", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	out, err := exec.Command(binary, "once", "--config.file", file).CombinedOutput()
	stack.Figure(t, "Cassandra 3 nodes, first contact point (node 1) down before start: dbcanary once exited %v after %s", err, time.Since(t0).Round(100*time.Millisecond))
	t.Logf("dbcanary once:\n%s", out)
	if err != nil {
		t.Errorf("dbcanary once with the first contact point down: %v", err)
	}
}

// statusErrors are the recent error messages of target's ops on /status.json.
func (d *daemon) statusErrors(t *testing.T, target string) []string {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Targets []struct {
			Name string
			Ops  []struct {
				Errors []struct{ Message string }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	var out []string
	for _, tg := range snap.Targets {
		if tg.Name != target {
			continue
		}
		for _, o := range tg.Ops {
			for _, e := range o.Errors {
				out = append(out, e.Message)
			}
		}
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
