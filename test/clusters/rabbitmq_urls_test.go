//go:build integration

package clusters

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/test/pki"
	"github.com/dbcanary/dbcanary/test/stack"
)

// rabbitmqURLsConfig is a daemon config with one target given every node of
// the cluster as urls (in the order of order, 1-based node numbers), a
// quorum queue, the shipped timeouts; publish at 4/s; loss_timeout 5s (the
// shipped 30s is longer than a phase: a message lost at the switch would be
// counted after the test looked). With tls the urls are the nodes' AMQPS
// listeners, verified against the test's CA (rabbitmqClusterTLS).
func rabbitmqURLsConfig(t *testing.T, target string, tls bool, order ...int) string {
	t.Helper()
	all := strings.Split(rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_URLS"), ",")
	tlsBlock := ""
	if tls {
		all = strings.Split(rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_TLS_URLS"), ",")
		tlsBlock = "\n      tls: {ca_file: " + rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_CA_FILE") + "}"
	}
	var urls []string
	for _, i := range order {
		urls = append(urls, all[i-1])
	}
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
      queue_type: quorum
      loss_timeout: 5s%s
`, t.TempDir(), target, strings.Join(urls, ", "), rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"), tlsBlock)
}

var connectedLine = regexp.MustCompile(`msg="connected to RabbitMQ node"[^\n]*? node=(\S+)`)

// connectedNodes lists the nodes the daemon's log says it connected to, in order.
func (d *daemon) connectedNodes() []string {
	var out []string
	for _, m := range connectedLine.FindAllStringSubmatch(d.logs.String(), -1) {
		out = append(out, m[1])
	}
	return out
}

// nodeOf is the cluster node number (1-based) a URL (amqp or amqps) names.
func nodeOf(t *testing.T, u string) int {
	t.Helper()
	for _, key := range []string{"DBCANARY_TEST_RABBITMQ_URLS", "DBCANARY_TEST_RABBITMQ_TLS_URLS"} {
		if i := slices.Index(strings.Split(rabbitmq[key], ","), u); i >= 0 {
			return i + 1
		}
	}
	t.Fatalf("%s is no node of the cluster", u)
	return 0
}

// TestRabbitMQURLsFailover: the daemon is given the three nodes as urls and a
// quorum queue; a private Prometheus evaluates the generated rules
// (time-scaled) on its metrics:
//   - the node it is connected to killed with SIGKILL: the probe moves to
//     another node, ops keep succeeding after a few failures at the switch
//     (counted and printed), DbcanaryTargetDown does not fire and the log
//     names the new node;
//   - the first URL's node down before the daemon starts: it starts on the
//     next node without a single failed op.
//
// The turn-around of TestRabbitMQNodeFaults/the_url's_node_kill_-9 (one url).
func TestRabbitMQURLsFailover(t *testing.T) {
	rabbitmq = useCluster(t, "rabbitmq-cluster")
	ops := []string{"publish", "consume"}
	phase := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	phase("the connected node kill -9", func(t *testing.T) { connectedNodeKill(t, "rabbitmq-urls", false) })
	// The same over TLS (AMQPS on every node, the test's CA, password
	// auth): the production shape of the reference deployment.
	phase("the connected node kill -9, over TLS", func(t *testing.T) { connectedNodeKill(t, "rabbitmq-urls-tls", true) })

	phase("the first url's node down at start-up", func(t *testing.T) {
		const target = "rabbitmq-urls-start"
		rabbitmqNode(1).kill9(t)
		t.Cleanup(func() { restartCluster(t, "rabbitmq-cluster") })
		d := startDaemon(t, rabbitmqURLsConfig(t, target, false, 1, 2, 3))
		s := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 publishes and consumes with node 1 down")
		var nodes []string
		enginetest.WaitFor(t, 30*time.Second, "the log to name the node", func() bool {
			nodes = d.connectedNodes()
			return len(nodes) > 0
		})
		stack.Figure(t, "RabbitMQ 3 nodes, urls of the 3 nodes, node 1 (the first url) down at start-up: connected to %v; %v ok publishes, %v ok consumes, failures %v; dbcanary_target_up %v",
			nodes, s.ok["publish"], s.ok["consume"], s.causes, s.up)
		if len(s.causes) > 0 {
			t.Errorf("ops failed with the first url's node down at start-up: %v", s.causes)
		}
		if nodeOf(t, nodes[0]) == 1 {
			t.Errorf("connected to node 1, which is down: %v", nodes)
		}
		if s.up != 1 {
			t.Errorf("dbcanary_target_up = %v", s.up)
		}
		if !strings.Contains(d.logs.String(), "failed=") {
			t.Errorf("the connect log does not give the failed node's error")
		}
	})
}

// connectedNodeKill kills the node the daemon is connected to (urls of the
// three, quorum queue, plain AMQP or AMQPS) and checks that it moves on to
// another node with a few failures at most and no page.
func connectedNodeKill(t *testing.T, target string, tls bool) {
	ops := []string{"publish", "consume"}
	transport := "AMQP"
	if tls {
		transport = "AMQPS (TLS, the test's CA)"
	}
	d := startDaemon(t, rabbitmqURLsConfig(t, target, tls, 1, 2, 3))
	al := startAlerting(t, d.addr)
	d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 publishes and consumes on the healthy cluster")
	al.waitScraped(t, target)
	nodes := d.connectedNodes()
	if len(nodes) == 0 {
		t.Fatalf("the log names no node it connected to")
	}
	from := nodes[len(nodes)-1]
	killed := nodeOf(t, from)

	before := d.snap(t, target)
	pre := al.firing(t, "critical")
	t0 := time.Now()
	rabbitmqNode(killed).kill9(t)
	// Even if the test fails: a cluster stopped with a node already
	// dead does not start again until the last node down starts first.
	t.Cleanup(func() { restartCluster(t, "rabbitmq-cluster") })
	settled := d.waitOK(t, target, before, ops, 10, 3*time.Minute, "10 successes of each op after the kill")
	after := d.waitOK(t, target, settled, ops, 40, 3*time.Minute, "40 more successes of each op on another node")
	crit := al.firedSince(t, "critical", t0)
	nodes = d.connectedNodes()
	to := nodes[len(nodes)-1]
	atSwitch := diff(before.causes, settled.causes)
	stack.Figure(t, "RabbitMQ 3 nodes over %s, quorum queue, urls of the 3 nodes, the connected node (%d, %s) kill -9: failures at the switch %v (%v in all; first 10 successes of each op %s after the kill), reconnected to %s; then %v ok publishes and %v ok consumes with %v failures over %s; dbcanary_target_up %v; critical alerts %v (firing before: %v)",
		transport, killed, from, atSwitch, total(atSwitch), settled.at.Sub(t0).Round(time.Second), to,
		after.ok["publish"]-settled.ok["publish"], after.ok["consume"]-settled.ok["consume"],
		total(diff(settled.causes, after.causes)), after.at.Sub(settled.at).Round(time.Second), after.up, crit, pre)
	if to == from {
		t.Errorf("the log's last connected node is still the killed one, %s: %v", from, nodes)
	}
	// A few ops in flight at the kill may fail (publish refused, and the
	// consume sample that says the consumer is not connected): a bound,
	// not a timing.
	if n := total(atSwitch); n > 10 {
		t.Errorf("%v failures at the switch, want a few at most: %v", n, atSwitch)
	}
	if f := diff(settled.causes, after.causes); len(f) > 0 {
		t.Errorf("after the switch ops failed: %v", f)
	}
	if after.up != 1 {
		t.Errorf("dbcanary_target_up = %v after the switch", after.up)
	}
	if slices.Contains(minus(crit, pre), "DbcanaryTargetDown{target="+target+"}") {
		t.Errorf("DbcanaryTargetDown fired with one node down and urls of all three: critical alerts %v", crit)
	}
	al.pageRow(t, "rabbitmq", target, fmt.Sprintf("node %d, the connected node, `kill -9` (`urls:` of the three over %s, quorum queue): %v failed at the switch, ops on %s %s after the kill, then %v failed",
		killed, transport, total(atSwitch), to, settled.at.Sub(t0).Round(time.Second), total(diff(settled.causes, after.causes))),
		"no page", t0, pre, nil)
	if !regexp.MustCompile(`msg="the connection to the RabbitMQ node is closed: reconnecting, next node first"[^\n]*? node=` + regexp.QuoteMeta(from)).MatchString(d.logs.String()) {
		t.Errorf("the log does not say the connection to %s closed", from)
	}
	took := restartCluster(t, "rabbitmq-cluster")
	back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after the node is back")
	t.Logf("node %d restarted in %s; failures while it came back: %v", killed, took.Round(100*time.Millisecond), diff(after.causes, back.causes))
	// Confirms and the loss clock across the switch: more than
	// loss_timeout of connected time has passed since the kill, and no
	// confirmed message was lost.
	if n := diff(before.causes, back.causes)["consume/lost"]; n > 0 {
		t.Errorf("%v confirmed messages counted lost across the switch", n)
	}
	stack.Figure(t, "RabbitMQ urls over %s, the connected node kill -9 and back: consume/lost %v over %s (loss_timeout 5s)", transport,
		diff(before.causes, back.causes)["consume/lost"], back.at.Sub(t0).Round(time.Second))
}

// rabbitmqClusterTLS makes the RabbitMQ cluster's certificates (a CA of the
// test's, a server certificate for 127.0.0.1 and localhost) in the stack
// folder, unless they are there and valid for a day more, and has
// rabbitmq-cluster.sh start every node with an AMQPS listener beside AMQP.
func rabbitmqClusterTLS(t *testing.T) {
	t.Helper()
	dir := filepath.Join(stack.DataDir(), "rabbitmq-cluster-tls")
	fresh := false
	if b, err := os.ReadFile(filepath.Join(dir, "server.pem")); err == nil {
		if blk, _ := pem.Decode(b); blk != nil {
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil && time.Until(c.NotAfter) > 24*time.Hour {
				fresh = true
			}
		}
	}
	if !fresh {
		authority := pki.NewCA(t, "dbcanary clusters test CA")
		pki.WriteFile(t, filepath.Join(dir, "ca.pem"), authority.PEM)
		authority.Issue(t, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), "rabbitmq.dbcanary.test",
			time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour), x509.ExtKeyUsageServerAuth)
	}
	if err := os.Setenv("DBCANARY_RABBITMQ_CLUSTER_TLS_DIR", dir); err != nil {
		t.Fatal(err)
	}
}
