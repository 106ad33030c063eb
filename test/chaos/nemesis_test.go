//go:build soakchaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/chaos/history"
	"github.com/dbcanary/dbcanary/test/stack"
)

// Budgets, from injection to the page: the alert's shipped `for:`, the time
// dbcanary needs to see the fault (an op failing within its timeout: 45 s;
// min_slow_samples slow samples: 90 s), one scrape and evaluation interval
// (30 s, the chart's) and Alertmanager's group_wait (30 s), plus 45 s of
// slack for a loaded machine.
const (
	budgetDown    = 2*time.Minute + 45*time.Second + 30*time.Second + 30*time.Second + 45*time.Second // 4m30s
	budgetLatency = 5*time.Minute + 90*time.Second + 30*time.Second + 30*time.Second + 45*time.Second // 8m15s
	// the flood stage is noticed at the next disk check (cluster.info.update.interval, 30 s)
	budgetFlood = budgetDown + 30*time.Second
	// a lost ledger entry is found at its check age (lossyLedgerAge) by the
	// next ledger_check (every 10 s) once the broker is back (30 s);
	// DbcanaryDurabilityLoss has no for:.
	budgetLoss = lossyLedgerAge + 10*time.Second + 30*time.Second + 30*time.Second + 30*time.Second + 45*time.Second // 3m25s
)

// lossyLedgerAge is the lossy target's one ledger check age.
const lossyLedgerAge = time.Minute

// lossyNotBefore: the lossy broker's kill -9 (a 15-30 s outage of its
// only node) is drawn only once ErrorBudgetBurn's 1h window holds an hour
// of the run; earlier, the few failed ops of the restart are 1.44 % of a
// window that started minutes ago, as they would not be in a deployment
// that has run for a day.
const lossyNotBefore = time.Hour

// fault is a catalogue entry and how to inject and revert it; detail
// says what was done, for the nemesis log.
type fault struct {
	history.Kind
	inject, revert func(ctx context.Context, n *nemesis, p history.Planned) (detail string, err error)
}

func down(name, group, target string, budget time.Duration, pages ...string) history.Kind {
	return history.Kind{Name: name, Group: group, Target: target, Min: budget + 30*time.Second, Max: budget + 2*time.Minute, Pages: pages, Budget: budget}
}

func quiet(name, group, target string, lo, hi time.Duration) history.Kind {
	return history.Kind{Name: name, Group: group, Target: target, Min: lo, Max: hi}
}

const alertDown = generate.AlertTargetDown

// catalogue is every fault the nemesis draws from, with its expected outcome.
func catalogue() []fault {
	return append([]fault{
		{quiet("cas-kill9-one", "cas", targetCas, time.Minute, 4*time.Minute), casKill(1), casRestart},
		{down("cas-kill9-two", "cas", targetCas, budgetDown, alertDown), casKill(2), casRestart},
		{quiet("cas-node-cut", "cas", targetCas, time.Minute, 4*time.Minute), casCut(false), casCut(true)},
		{quiet("mq-kill9-one", "mq", targetMQ, time.Minute, 4*time.Minute), nodeKill("RABBITMQ"), scriptStart("rabbitmq-cluster")},
		{down("mq-memory-alarm", "mq", targetMQ, budgetDown, alertDown), mqctl("set_vm_memory_high_watermark", "0.00001"), mqctl("set_vm_memory_high_watermark", "0.4")},
		{down("mq-disk-alarm", "mq", targetMQ, budgetDown, alertDown), mqctl("set_disk_free_limit", "100000GB"), mqctl("set_disk_free_limit", "50MB")},
		{quiet("os-kill9-one", "os", targetOS, time.Minute, 4*time.Minute), nodeKill("OPENSEARCH"), scriptStart("opensearch-cluster")},
		{down("os-index-block", "os", targetOS, budgetDown, alertDown), osPut("/dbcanary-*/_settings", `{"index.blocks.write": true}`), osPut("/dbcanary-*/_settings", `{"index.blocks.write": null}`)},
		{down("os-flood-stage", "os", targetOS, budgetFlood, alertDown), osPut("/_cluster/settings", floodStage), floodOff},
		{down("s3-stopped", "s3", targetS3, budgetDown, alertDown), scriptAction("minio", "stop"), scriptStart("minio")},
		{down("s3-latency-x4", "s3", targetS3, budgetLatency, generate.AlertLatencyAboveBaseline), s3Latency, s3LatencyOff},
		{down("s3-wrong-credentials", "s3", targetS3, budgetDown, generate.AlertTargetMisconfigured), s3Creds(true), s3Creds(false)},
		{lossKind(), lossyKill, nothing},
		{quiet("config-broken-reload", history.GroupDaemon, "", time.Minute, 3*time.Minute), brokenReload, goodReload},
		{quiet("dbcanary-kill9", history.GroupDaemon, "", 20*time.Second, time.Minute), daemonKill, daemonStart},
		{quiet("dbcanary-stop-in-reload", history.GroupDaemon, "", 20*time.Second, time.Minute), daemonStopInReload, daemonStart},
		{quiet("state-dir-full", history.GroupDaemon, "", 2*time.Minute, 8*time.Minute), fillState, emptyState}, // past 5m: a DbcanaryLedgerNotSaved ticket, no page
	}, swiftKinds()...)
}

// lossKind: the lossy broker killed and started again at once; its ledger
// entries not yet checked are gone, and DbcanaryDurabilityLoss must page.
func lossKind() history.Kind {
	k := down("mq-lossy-kill9", "mq-lossy", targetMQLossy, budgetLoss, history.AlertDurabilityLoss)
	k.NotBefore = lossyNotBefore
	return k
}

func lossyKill(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	stack.Kill9(n.t, stack.PIDFile(n.t, filepath.Join(n.tp.lossy.dir, "rabbitmq", "rabbitmq.pid")), "the lossy rabbitmq broker")
	t0 := time.Now()
	if _, err := n.tp.lossy.run("start"); err != nil {
		return "", err
	}
	return fmt.Sprintf("kill -9 the lossy broker, started again in %s", time.Since(t0).Round(time.Second)), nil
}

// Swift's container server stopped. swift.sh runs one replica of each ring,
// and the proxy trusts the container's existence for an hour (swift.sh
// RECHECK_CONTAINER): PUT, GET, HEAD and DELETE go on, the listing fails
// (HTTP 503: no container replica answers), then lags until the object
// updater replays the pending updates. A listing that fails is an op that
// cannot reach the store: stopped past TargetDown's for:, it pages
// (swift-container-stopped; the 2-hour run of 6 Dec 2026 drew it for 2m48s as
// "no page" and was paged, rightly). Stopped for under a minute, the failed
// lists span less than the for: even at the scrape's 30 s grain (one list
// every 15 s: at most 60 + 15 + 30 s of zeros), and the lag after it is no
// loss (swift-container-blip). About 3 list failures a minute are over
// 1.44 % of the S3 target's ops in a window of the run's first minutes, so
// both are drawn after 10 minutes.
func swiftKinds() []fault {
	blip := quiet("swift-container-blip", "swift", targetSwift, 30*time.Second, time.Minute)
	blip.NotBefore = 10 * time.Minute
	stopped := down("swift-container-stopped", "swift", targetSwift, budgetDown, alertDown)
	stopped.NotBefore = 10 * time.Minute
	return []fault{
		{blip, swiftVerb("stop-container"), swiftVerb("start-container")},
		{stopped, swiftVerb("stop-container"), swiftVerb("start-container")},
	}
}

// nothing reverts a fault that ended at its injection (a kill and restart
// whose outcome arrives later).
func nothing(context.Context, *nemesis, history.Planned) (string, error) {
	return "nothing to revert", nil
}

// swiftVerb runs a verb of swift.sh on the run's Swift (stop-container:
// PUTs still succeed, the listing fails, then lags until the updater
// replays the pending updates).
func swiftVerb(verb string) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
		if _, err := n.tp.swift.run(verb); err != nil {
			return "", err
		}
		return "swift.sh " + verb, nil
	}
}

// Flood stage: every node over its watermarks (1 % of disk used), as a
// full disk would; reverted by resetting the settings (OpenSearch lifts
// the read_only_allow_delete block by itself once under the watermark).
const (
	floodStage    = `{"transient": {"cluster.routing.allocation.disk.threshold_enabled": true, "cluster.routing.allocation.disk.watermark.low": "1%", "cluster.routing.allocation.disk.watermark.high": "1%", "cluster.routing.allocation.disk.watermark.flood_stage": "1%", "cluster.info.update.interval": "10s"}}`
	floodStageOff = `{"persistent": {"cluster.blocks.create_index": null}, "transient": {"cluster.blocks.create_index": null, "cluster.routing.allocation.disk.threshold_enabled": null, "cluster.routing.allocation.disk.watermark.low": null, "cluster.routing.allocation.disk.watermark.high": null, "cluster.routing.allocation.disk.watermark.flood_stage": null, "cluster.info.update.interval": null}}`
)

// node is the fault's k-th node of n (1-based), from its sequence number:
// the schedule names the fault, its number the nodes.
func node(p history.Planned, k, n int) int { return (p.Seq+k-1)%n + 1 }

func casKill(count int) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(_ context.Context, n *nemesis, p history.Planned) (string, error) {
		var killed []string
		for k := range count {
			i := node(p, k, n.tp.nodes["CASSANDRA"])
			stack.Kill9(n.t, n.tp.pid(n.t, "CASSANDRA", i), fmt.Sprintf("cassandra node %d", i))
			killed = append(killed, fmt.Sprint(i))
		}
		return "kill -9 cassandra node " + strings.Join(killed, ", "), nil
	}
}

func casRestart(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	return scriptRun("cassandra-cluster", "start")
}

func casCut(enable bool) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(_ context.Context, n *nemesis, p history.Planned) (string, error) {
		name := fmt.Sprintf("cassandra-node%d", node(p, 0, n.tp.nodes["CASSANDRA"]))
		px, err := n.tp.casProxies.Proxy(name)
		if err != nil {
			return "", err
		}
		if enable {
			return "proxy " + name + " enabled", px.Enable()
		}
		return "proxy " + name + " disabled (the node cut off from the driver)", px.Disable()
	}
}

func nodeKill(store string) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(_ context.Context, n *nemesis, p history.Planned) (string, error) {
		i := node(p, 0, n.tp.nodes[store])
		stack.Kill9(n.t, n.tp.pid(n.t, store, i), fmt.Sprintf("%s node %d", store, i))
		return fmt.Sprintf("kill -9 %s node %d", strings.ToLower(store), i), nil
	}
}

func scriptStart(script string) func(context.Context, *nemesis, history.Planned) (string, error) {
	return scriptAction(script, "start")
}

func scriptAction(script, action string) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(context.Context, *nemesis, history.Planned) (string, error) { return scriptRun(script, action) }
}

func scriptRun(script, action string) (string, error) {
	t0 := time.Now()
	out, err := stack.Script(script, action)
	if err != nil {
		return "", fmt.Errorf("%s.sh %s: %w: %s", script, action, err, out)
	}
	return fmt.Sprintf("%s.sh %s (%s)", script, action, time.Since(t0).Round(time.Second)), nil
}

// mqctl runs rabbitmqctl on the fault's node (an alarm on one node blocks
// publishing on the whole cluster).
func mqctl(args ...string) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(ctx context.Context, n *nemesis, p history.Planned) (string, error) {
		i := node(p, 0, n.tp.nodes["RABBITMQ"])
		name := n.tp.mq.Get(n.t, fmt.Sprintf("DBCANARY_TEST_RABBITMQ_NODE%d_NAME", i))
		home := filepath.Join(filepath.Dir(n.tp.mq.Get(n.t, fmt.Sprintf("DBCANARY_TEST_RABBITMQ_NODE%d_PIDFILE", i))), "home")
		cmd := exec.CommandContext(ctx, "/usr/lib/rabbitmq/bin/rabbitmqctl", append([]string{"-n", name}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "ERL_EPMD_ADDRESS=127.0.0.1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("rabbitmqctl %v: %w: %s", args, err, out)
		}
		return fmt.Sprintf("rabbitmqctl -n %s %s", name, strings.Join(args, " ")), nil
	}
}

// floodOff resets the watermarks and lifts the blocks the flood stage set
// (read-only indices; the cluster's create-index block, once every node
// passed it): with the disk threshold off again no monitor would lift them.
func floodOff(ctx context.Context, n *nemesis, p history.Planned) (string, error) {
	a, err := osPut("/_cluster/settings", floodStageOff)(ctx, n, p)
	if err != nil {
		return a, err
	}
	b, err := osPut("/dbcanary-*/_settings", `{"index.blocks.read_only_allow_delete": null}`)(ctx, n, p)
	return a + "; " + b, err
}

func osPut(path, body string) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(ctx context.Context, n *nemesis, _ history.Planned) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, n.tp.osURL+path, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("PUT %s: HTTP %d", path, resp.StatusCode)
		}
		return "PUT " + path + " " + body, nil
	}
}

// s3Latency adds 4 x the S3 primary op's p99 figure to every reply.
func s3Latency(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	lat, what, err := n.latencyX4(targetS3, "s3")
	if err != nil {
		return "", err
	}
	_, err = n.tp.s3.AddToxic("chaos-latency", "latency", "downstream", 1, toxiproxy.Attributes{"latency": lat.Milliseconds()})
	return what, err
}

func s3LatencyOff(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	return "latency toxic removed", n.tp.s3.RemoveToxic("chaos-latency")
}

func s3Creds(wrong bool) func(context.Context, *nemesis, history.Planned) (string, error) {
	return func(ctx context.Context, n *nemesis, _ history.Planned) (string, error) {
		n.d.badS3 = wrong
		status, body, err := n.d.reload(ctx, false)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("reload: HTTP %d: %s", status, body)
		}
		return fmt.Sprintf("reload with the S3 secret key file wrong=%v", wrong), err
	}
}

// brokenReload must be refused: the old config keeps running.
func brokenReload(ctx context.Context, n *nemesis, _ history.Planned) (string, error) {
	status, _, err := n.d.reload(ctx, true)
	if err != nil {
		return "", err
	}
	if status == http.StatusOK {
		return "", fmt.Errorf("a broken config was accepted (HTTP 200)")
	}
	return fmt.Sprintf("reload with a broken config refused (HTTP %d)", status), nil
}

func goodReload(ctx context.Context, n *nemesis, _ history.Planned) (string, error) {
	status, body, err := n.d.reload(ctx, false)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("reload: HTTP %d: %s", status, body)
	}
	return "the good config back, reloaded", err
}

func daemonKill(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	n.d.kill9()
	return "kill -9 dbcanary", nil
}

func daemonStopInReload(ctx context.Context, n *nemesis, _ history.Planned) (string, error) {
	return "SIGTERM during a reload: " + n.d.stopInReload(ctx), nil
}

func daemonStart(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	t0 := time.Now()
	n.d.start()
	return fmt.Sprintf("dbcanary started again, ready in %s", time.Since(t0).Round(100*time.Millisecond)), nil
}

// fillState fills the state directory's file system to the last byte.
func fillState(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	f, err := os.Create(filepath.Join(n.d.stateDir, "chaos-filler"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var total int64
	for total < 1<<30 {
		w, err := f.Write(buf)
		total += int64(w)
		if err != nil {
			return fmt.Sprintf("state directory filled: %d MiB written until %v", total>>20, err), nil
		}
	}
	return "", fmt.Errorf("wrote 1 GiB into the state directory without filling it")
}

func emptyState(_ context.Context, n *nemesis, _ history.Planned) (string, error) {
	return "filler removed", os.Remove(filepath.Join(n.d.stateDir, "chaos-filler"))
}
