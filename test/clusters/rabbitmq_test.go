//go:build integration

package clusters

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// rabbitmqConfig is a daemon config with one target on node urlNode of the
// cluster (the probe takes one url), a quorum queue, the shipped timeouts
// and loss_timeout; publish at 4/s (the shipped 1/s is too slow for a
// test's phases).
func rabbitmqConfig(t *testing.T, target string, urlNode int) string {
	t.Helper()
	urls := strings.Split(rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_URLS"), ",")
	return fmt.Sprintf(`global:
  state_dir: %s
targets:
  - name: %s
    backend: rabbitmq
    ops: {publish: {rate: 4}, consume: {}}
    rabbitmq:
      url: %s
      username: %s
      password_file: %s
      queue_type: quorum
`, t.TempDir(), target, urls[urlNode-1], rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), rabbitmq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"))
}

func rabbitmqNode(i int) clusterNode {
	return clusterNode{script: "rabbitmq-cluster", env: rabbitmq, store: "RABBITMQ", i: i}
}

// TestRabbitMQNodeFaults: the daemon publishes to and consumes from a quorum
// queue of the 3-node cluster through node 1 (its url), and a private
// Prometheus evaluates the generated rules (time-scaled) on its metrics:
//   - node 3 killed with SIGKILL: after the ops in flight, every op
//     succeeds and no critical alert fires;
//   - nodes 2 and 3 killed (the queue loses its majority): ops fail and
//     DbcanaryTargetDown is the only critical alert; both back: it clears;
//   - node 1, the url's node, killed: the canary loses the cluster
//     (DbcanaryTargetDown) while `dbcanary once` through node 2 shows the
//     cluster serving: the url's node is a single point of failure of the
//     canary (issue 21 item 5).
func TestRabbitMQNodeFaults(t *testing.T) {
	rabbitmq = useCluster(t, "rabbitmq-cluster")
	const target = "rabbitmq-cluster"
	ops := []string{"publish", "consume"}
	d := startDaemon(t, rabbitmqConfig(t, target, 1))
	al := startAlerting(t, d.addr)
	start := d.snap(t, target)
	d.waitOK(t, target, start, ops, 20, 3*time.Minute, "20 publishes and consumes on the healthy cluster")
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
		rabbitmqNode(3).kill9(t)
		settled := d.waitOK(t, target, before, ops, 10, 3*time.Minute, "10 successes of each op after the kill")
		after := d.waitOK(t, target, settled, ops, 40, 3*time.Minute, "40 more successes of each op with one node down")
		crit, warn := al.firedSince(t, "critical", t0), al.firedSince(t, "warning", t0)
		stack.Figure(t, "RabbitMQ 3 nodes, quorum queue, url on node 1, node 3 kill -9: failures at the kill %v (first successes after %s), then %v ok publishes and %v ok consumes with %v failures over %s; critical alerts %v (firing before: %v), warnings %v",
			diff(before.causes, settled.causes), settled.at.Sub(t0).Round(time.Second), after.ok["publish"]-settled.ok["publish"], after.ok["consume"]-settled.ok["consume"],
			total(diff(settled.causes, after.causes)), after.at.Sub(settled.at).Round(time.Second), crit, pre, warn)
		if f := diff(settled.causes, after.causes); len(f) > 0 {
			t.Errorf("with one node of three down, ops on the quorum queue failed: %v", f)
		}
		if n := minus(crit, pre); len(n) > 0 {
			t.Errorf("one node of three down fired critical alerts: %v", n)
		}
		al.pageRow(t, "rabbitmq", target, fmt.Sprintf("node 3 `kill -9` (quorum queue, one `url` on node 1); %v failed at the kill, then %v ops ok and %v failed over %s",
			total(diff(before.causes, settled.causes)), total(diff(settled.ok, after.ok)), total(diff(settled.causes, after.causes)), after.at.Sub(settled.at).Round(time.Second)),
			"no page", t0, pre, nil)
		took := restartCluster(t, "rabbitmq-cluster")
		back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after node 3 is back")
		t.Logf("node 3 restarted in %s; failures while it came back: %v", took.Round(100*time.Millisecond), diff(after.causes, back.causes))
	})

	phase("second node down, then both back", func(t *testing.T) {
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		t0 := time.Now()
		rabbitmqNode(2).kill9(t)
		rabbitmqNode(3).kill9(t)
		var fired time.Duration
		waitTargetDown(t, al, d, target, before, 3*time.Minute, func() { fired = time.Since(t0) })
		down := d.snap(t, target)
		crit := al.firedSince(t, "critical", t0)
		stack.Figure(t, "RabbitMQ 3 nodes, quorum queue, nodes 2 and 3 kill -9: DbcanaryTargetDown firing %s after the kill (rules time-scaled 0.05); failures %v; dbcanary_target_up %v; critical alerts %v, pages after the shipped inhibition %v",
			fired.Round(time.Second), diff(before.causes, down.causes), down.up, crit, pages(crit, target))
		// One fault, one page: what the shipped Alertmanager inhibition
		// leaves of the critical alerts is DbcanaryTargetDown alone.
		if got := pages(crit, target); !slices.Equal(got, []string{"DbcanaryTargetDown{target=" + target + "}"}) {
			t.Errorf("pages with two nodes down: %v (critical alerts %v), want DbcanaryTargetDown alone (one fault, one page)", got, crit)
		}
		al.pageRow(t, "rabbitmq", target, fmt.Sprintf("nodes 2 and 3 `kill -9` (the quorum queue loses its majority): failures %v; DbcanaryTargetDown firing %s after the kill (`for:` scaled to 6 s)",
			diff(before.causes, down.causes), fired.Round(time.Second)),
			"DbcanaryTargetDown alone", t0, pre, []string{"DbcanaryTargetDown{target=" + target + "}"})
		took := restartCluster(t, "rabbitmq-cluster")
		t1 := time.Now()
		back := d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after both nodes are back")
		var cleared time.Duration
		waitQuiet(t, al, 3*time.Minute, pre, func() { cleared = time.Since(t1) })
		stack.Figure(t, "RabbitMQ 3 nodes, nodes 2 and 3 back (restarted in %s): ops succeed again after %s, no critical alert firing %s after the restart; failures while coming back %v",
			took.Round(100*time.Millisecond), back.at.Sub(t1).Round(time.Second), cleared.Round(time.Second), diff(down.causes, back.causes))
	})

	phase("the url's node kill -9", func(t *testing.T) {
		before := d.snap(t, target)
		pre := al.firing(t, "critical")
		t0 := time.Now()
		rabbitmqNode(1).kill9(t)
		var fired time.Duration
		waitTargetDown(t, al, d, target, before, 3*time.Minute, func() { fired = time.Since(t0) })
		down := d.snap(t, target)
		// The cluster still serves: the same canary through node 2.
		file := filepath.Join(t.TempDir(), "once.yaml")
		if err := os.WriteFile(file, []byte(rabbitmqConfig(t, "rabbitmq-node2", 2)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "once", "--config.file", file).CombinedOutput()
		stack.Figure(t, "RabbitMQ 3 nodes, node 1 (the url's node) kill -9: DbcanaryTargetDown firing %s after the kill, failures %v; dbcanary once through node 2 meanwhile: exit %v",
			fired.Round(time.Second), diff(before.causes, down.causes), err)
		if err != nil {
			t.Errorf("dbcanary once through node 2 with node 1 down: %v\n%s", err, out)
		}
		al.pageRow(t, "rabbitmq", target, fmt.Sprintf("node 1, the only `url`'s node, `kill -9` while the cluster serves (`dbcanary once` through node 2: exit %v): failures %v; DbcanaryTargetDown firing %s after the kill",
			err, diff(before.causes, down.causes), fired.Round(time.Second)),
			"DbcanaryTargetDown alone: the canary's single url is down (use `urls:`)", t0, pre, []string{"DbcanaryTargetDown{target=" + target + "}"})
		took := restartCluster(t, "rabbitmq-cluster")
		t1 := time.Now()
		d.waitOK(t, target, d.snap(t, target), ops, 20, 3*time.Minute, "20 successes of each op after node 1 is back")
		waitQuiet(t, al, 3*time.Minute, pre, func() {})
		t.Logf("node 1 restarted in %s; alerts clear %s later", took.Round(100*time.Millisecond), time.Since(t1).Round(time.Second))
	})
}
