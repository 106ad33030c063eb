//go:build integration

package cassandra_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/cassandra"
	"github.com/dbcanary/dbcanary/test/stack"
)

// testLedgers is the store this test binary opens its probes' durability
// ledgers from, as the daemon does for its targets (enginetest.OpenLedger).
var testLedgers = probes.NewLedgerStore("")

// ledgerCounts reads the ledger's checks of one target (probes.Store.CheckCounts).
func ledgerCounts(t *testing.T, target string) map[string]float64 {
	t.Helper()
	out, err := testLedgers.CheckCounts(target)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kill9 kills the private node with SIGKILL (no drain, no flush, no final
// commit log sync) and waits until it is gone.
func (n *privateNode) kill9(t *testing.T) {
	t.Helper()
	stack.Kill9(t, stack.PIDFile(t, filepath.Join(n.dir, "cassandra", "cassandra.pid")), "the private Cassandra node")
}

// ledgerProbe builds a probe of the private node with a ledger checked at 10s.
func ledgerProbe(t *testing.T, n *privateNode, target string) *cassandra.Probe {
	t.Helper()
	cass := fmt.Sprintf(`hosts: [%q]
port: %d
username: %s
password_file: %s
local_dc: %s
keyspace: dbcanary_ledger
replication: {class: SimpleStrategy, replication_factor: 1}
ttl: 10m
request_timeout: 3s
connect_timeout: 3s
reconnect_interval: 1s
consistency: {ledger_write: ONE, ledger_check: ONE}
ledger: {ages: [10s]}
`, n.env["DBCANARY_TEST_CASSANDRA_HOST"], n.cql, n.env["DBCANARY_TEST_CASSANDRA_USER"], n.env["DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"], n.env["DBCANARY_TEST_CASSANDRA_DC"])
	cfg := enginetest.Parse(t, engineConfig("it-ledger", target, "ledger_write: {rate: 1}", cass))
	pt := probes.Target{Name: target, InstanceID: "it-ledger", Config: cfg.Targets[0].Probe, Logger: enginetest.Logger()}
	enginetest.OpenLedger(t, testLedgers, "cassandra", &pt)
	p, err := cassandra.New(pt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	enginetest.WaitFor(t, 90*time.Second, "the canary table", func() bool { return prepare(t, p) == nil })
	return p
}

// writeKillRestartCheck writes n ledger rows acknowledged at ONE, kills the
// node with SIGKILL, starts it again (with the script settings in env) and
// reads every row back: it returns the checks by result.
func writeKillRestartCheck(t *testing.T, node *privateNode, target string, writes int, env []string, al *alerting) map[string]float64 {
	t.Helper()
	p := ledgerProbe(t, node, target)
	if al != nil {
		al.waitScraped(t, target)
	}
	for range writes {
		if err := run(t, p, probes.OpLedgerWrite); err != nil {
			t.Fatalf("ledger_write: %v", err)
		}
	}
	if got := len(p.Ledger().Entries()); got != writes {
		t.Fatalf("ledger holds %d entries after %d acknowledged writes", got, writes)
	}
	node.kill9(t)
	node.extraEnv = env
	start := time.Now()
	node.start(t)
	t.Logf("%s: node killed with SIGKILL and started again in %s", target, time.Since(start).Round(time.Millisecond))

	// Read every entry back once it is 10s old; a check the restarting node
	// cannot answer yet (refused, auth, timeout) is no result and is retried.
	deadline := time.Now().Add(90 * time.Second)
	for len(p.Ledger().Entries()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ledger still holds %d entries after 90s", len(p.Ledger().Entries()))
		}
		err := run(t, p, probes.OpLedgerCheck)
		switch {
		case err == nil:
		case probes.CauseOf(err).DataCause():
			t.Logf("ledger_check: %v", err)
		default:
			t.Logf("ledger_check (retried): %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	return ledgerCounts(t, target)
}

// TestLedgerCommitlogKill9 is issue 12's Cassandra proof, on a private node
// whose commit log is compressed (so segments are buffered in the process
// until each sync, and a SIGKILL loses what a machine crash would):
//   - commitlog_sync: periodic with a 120s period: rows acknowledged at ONE
//     and not yet synced are gone after kill -9 and restart, and the ledger
//     reports them missing;
//   - commitlog_sync: batch (each write synced before it is acknowledged):
//     the same run reports zero missing.
func TestLedgerCommitlogKill9(t *testing.T) {
	periodic := []string{"DBCANARY_CASSANDRA_COMMITLOG_SYNC=periodic", "DBCANARY_CASSANDRA_COMMITLOG_SYNC_PERIOD=120000ms",
		"DBCANARY_CASSANDRA_COMMITLOG_COMPRESSION=LZ4Compressor"}
	batch := []string{"DBCANARY_CASSANDRA_COMMITLOG_SYNC=batch", "DBCANARY_CASSANDRA_COMMITLOG_COMPRESSION=LZ4Compressor"}
	const writes = 20
	node := startPrivateNode(t, periodic...)

	// The first run writes under periodic sync; the node comes back with
	// batch sync for the second run (the restart replays whatever was synced).
	al := startAlerting(t)
	got := writeKillRestartCheck(t, node, "ledger-periodic", writes, batch, al)
	stack.Figure(t, "Cassandra ledger, commitlog_sync: periodic (120s), %d rows acknowledged at ONE, kill -9: missing %v, intact %v, corrupted %v",
		writes, got["missing"], got["intact"], got["corrupted"])
	if got["missing"] == 0 || got["missing"]+got["intact"] != writes || got["corrupted"] != 0 {
		t.Errorf("periodic: checks %v, want acknowledged rows missing after kill -9, every other intact", got)
	}

	// The loss pages end to end: a private Prometheus evaluating the generated
	// rules (scaled by 0.05) sends DbcanaryDurabilityLoss to a private Alertmanager.
	if got["missing"] > 0 {
		tf := time.Now()
		a := al.waitAlert(t, 60*time.Second, map[string]string{"alertname": generate.AlertDurabilityLoss, "target": "ledger-periodic",
			"backend": "cassandra", "result": "missing", "age": "10s", "severity": "critical"})
		stack.Figure(t, "Cassandra ledger, periodic kill -9: %s reached Alertmanager %s after the last check: %s",
			generate.AlertDurabilityLoss, time.Since(tf).Round(time.Second), a.Annotations["description"])
	}

	got = writeKillRestartCheck(t, node, "ledger-batch", writes, batch, nil)
	stack.Figure(t, "Cassandra ledger, commitlog_sync: batch, %d rows acknowledged at ONE, kill -9: missing %v, intact %v, corrupted %v",
		writes, got["missing"], got["intact"], got["corrupted"])
	if got["missing"] != 0 || got["intact"] != writes || got["corrupted"] != 0 {
		t.Errorf("batch: checks %v, want all %d intact", got, writes)
	}
}
