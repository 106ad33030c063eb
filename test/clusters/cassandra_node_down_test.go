//go:build integration

package clusters

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/stack"
)

// TestCassandraNodeDownWarning is the other half of "which node" (issue 21
// item 4): one target on the whole 3-node cluster (RF 3, LOCAL_QUORUM). With
// node 2 killed by SIGKILL the target keeps serving through nodes 1 and 3;
// dbcanary_store_node_up goes to 0 for node 2 only, DbcanaryStoreNodeDown
// fires on the private Prometheus (rules time-scaled 0.05: for: 5m -> 15s)
// naming node 2 and the target, and no critical alert fires. Node 2
// restarted: the gauge is 1 again and the warning resolves.
func TestCassandraNodeDownWarning(t *testing.T) {
	cassandra = useCluster(t, "cassandra-cluster")
	const target = "cassandra-nodes"
	hosts := strings.Split(cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_HOSTS"), ",")
	if len(hosts) < 3 {
		t.Fatalf("cluster hosts %v, want 3", hosts)
	}
	port := cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_PORT")
	addr := func(i int) string { return net.JoinHostPort(hosts[i-1], port) }
	ops := []string{"insert", "read"}
	d := startDaemon(t, cassandraConfig(t, target, "dbcanary_clusters", "insert: {rate: 4}, read: {rate: 4}", ""))
	al := startAlerting(t, d.addr)
	start := d.snap(t, target)
	d.waitOK(t, target, start, ops, 20, 3*time.Minute, "20 successful inserts and reads on the healthy cluster")
	al.waitScraped(t, target)
	allUp := map[string]float64{addr(1): 1, addr(2): 1, addr(3): 1}
	d.waitNodes(t, target, allUp, 2*time.Minute, "the three nodes up in dbcanary_store_node_up")

	before := d.snap(t, target)
	pre := al.firing(t, "critical")
	t0 := time.Now()
	cassandraNode(2).kill9(t)
	down := map[string]float64{addr(1): 1, addr(2): 0, addr(3): 1}
	d.waitNodes(t, target, down, 3*time.Minute, "node 2 down, nodes 1 and 3 up in dbcanary_store_node_up")
	seen := time.Since(t0)
	settled := d.waitOK(t, target, before, ops, 10, 3*time.Minute, "10 successes of each op after the kill")
	fired := al.waitNodeAlert(t, target, []string{addr(2)}, 3*time.Minute)
	firedAfter := time.Since(t0)
	after := d.snap(t, target)
	// The gauge still says node 2 only: a node that flapped would show here.
	if got := d.nodes(t, target); !mapsEqual(got, down) {
		t.Errorf("dbcanary_store_node_up with node 2 down: %v, want %v", got, down)
	}
	crit, warn := al.firedSince(t, "critical", t0), al.firedSince(t, "warning", t0)
	stack.Figure(t, "Cassandra 3 nodes, node 2 kill -9, one target on the cluster: dbcanary_store_node_up{node=%s} 0 after %s (the others 1); %s firing %s after the kill (rules time-scaled 0.05: for: 5m -> 15s), summary %q; failures at the kill %v, then %v; dbcanary_target_up %v; critical alerts %v (firing before: %v), warnings %v",
		addr(2), seen.Round(100*time.Millisecond), generate.AlertStoreNodeDown, firedAfter.Round(time.Second), fired["summary"],
		diff(before.causes, settled.causes), diff(settled.causes, after.causes), after.up, crit, pre, warn)
	if !strings.Contains(fired["summary"], addr(2)) || !strings.Contains(fired["summary"], target) ||
		!strings.Contains(fired["description"], addr(2)) {
		t.Errorf("%s does not name node %s and target %s: %v", generate.AlertStoreNodeDown, addr(2), target, fired)
	}
	if after.up != 1 {
		t.Errorf("dbcanary_target_up = %v with one node down, want 1", after.up)
	}
	if n := minus(crit, pre); len(n) > 0 {
		t.Errorf("one node of three down paged: %v; %s is a warning", n, generate.AlertStoreNodeDown)
	}
	al.pageRow(t, "cassandra", target, fmt.Sprintf("node 2 `kill -9`, held past the warning's `for:`: dbcanary_store_node_up{node=%q} 0 after %s; %s firing %s after the kill (`for:` scaled to 15 s)",
		addr(2), seen.Round(100*time.Millisecond), generate.AlertStoreNodeDown, firedAfter.Round(time.Second)),
		"no page; DbcanaryStoreNodeDown (ticket) naming the node", t0, pre, nil)

	took := restartCluster(t, "cassandra-cluster")
	t1 := time.Now()
	d.waitNodes(t, target, allUp, 3*time.Minute, "node 2 up again in dbcanary_store_node_up")
	upAgain := time.Since(t1)
	enginetest.WaitFor(t, 3*time.Minute, generate.AlertStoreNodeDown+" to resolve", func() bool {
		return len(al.query(t, `ALERTS{alertname="`+generate.AlertStoreNodeDown+`"}`)) == 0
	})
	stack.Figure(t, "Cassandra 3 nodes, node 2 back (restarted in %s): dbcanary_store_node_up 1 again %s after the restart, %s resolved %s after it; critical alerts since the kill %v",
		took.Round(100*time.Millisecond), upAgain.Round(100*time.Millisecond), generate.AlertStoreNodeDown, time.Since(t1).Round(time.Second),
		minus(al.firedSince(t, "critical", t0), pre))
}

// nodes scrapes dbcanary_store_node_up of target, by node.
func (d *daemon) nodes(t *testing.T, target string) map[string]float64 {
	t.Helper()
	fams := d.families(t)
	out := map[string]float64{}
	for _, m := range fams["dbcanary_store_node_up"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["target"] == target {
			out[l["node"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// waitNodes waits until target's dbcanary_store_node_up is exactly want.
func (d *daemon) waitNodes(t *testing.T, target string, want map[string]float64, timeout time.Duration, what string) {
	t.Helper()
	var got map[string]float64
	deadline := time.Now().Add(timeout)
	for got = d.nodes(t, target); !mapsEqual(got, want); got = d.nodes(t, target) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; dbcanary_store_node_up %v, want %v", what, timeout, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// waitNodeAlert waits until DbcanaryStoreNodeDown fires for target on exactly
// the nodes given (Prometheus's /api/v1/alerts) and returns the annotations
// of the first one.
func (a *alerting) waitNodeAlert(t *testing.T, target string, nodes []string, timeout time.Duration) map[string]string {
	t.Helper()
	var got []string
	var ann map[string]string
	deadline := time.Now().Add(timeout)
	for {
		got, ann = nil, nil
		for _, al := range a.alerts(t) {
			if al.Labels["alertname"] == generate.AlertStoreNodeDown && al.State == "firing" && al.Labels["target"] == target {
				if al.Labels["severity"] != "warning" {
					t.Errorf("%s severity %q, want warning", generate.AlertStoreNodeDown, al.Labels["severity"])
				}
				got = append(got, al.Labels["node"])
				if ann == nil {
					ann = al.Annotations
				}
			}
		}
		slices.Sort(got)
		if slices.Equal(got, nodes) {
			return ann
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{target=%s} firing for nodes %v after %s, want %v", generate.AlertStoreNodeDown, target, got, timeout, nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// alerts is Prometheus's /api/v1/alerts: the active alerts with their
// rendered annotations.
func (a *alerting) alerts(t *testing.T) []promAlert {
	t.Helper()
	resp, err := http.Get(a.promURL + "/api/v1/alerts")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("alerts: %s", body)
	}
	return r.Data.Alerts
}
