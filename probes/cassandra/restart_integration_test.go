//go:build integration

package cassandra_test

import (
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/test/stack"
)

// TestNodeRestart stops the node under a running engine: the target goes
// down, and comes back after the node restarts, without restarting dbcanary.
func TestNodeRestart(t *testing.T) {
	h := enginetest.Start(t, engineConfig("rs", "cass-restart", "insert: {rate: 4}\nread: {rate: 4}", section(t, "dbcanary_it", "request_timeout: 3s\nreconnect_interval: 1s")))
	up := func() float64 { return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "cass-restart"}) }
	enginetest.WaitFor(t, 60*time.Second, "reads before the outage", func() bool { return okCount(t, h, "cass-restart", "read") >= 3 })

	if err := stack.Stop("cassandra"); err != nil {
		t.Fatal(err)
	}
	// Restart even if an assertion below fails, so later tests have a node.
	t.Cleanup(func() {
		if err := stack.Restart("cassandra"); err != nil {
			t.Error(err)
		}
	})
	enginetest.WaitFor(t, 60*time.Second, "target down", func() bool { return up() == 0 })
	down := failures(t, h, "cass-restart", "refused") + failures(t, h, "cass-restart", "timeout")
	if down == 0 {
		t.Errorf("no refused or timeout failure while the node was down")
	}
	t.Logf("while down: refused %v, timeout %v, other %v", failures(t, h, "cass-restart", "refused"),
		failures(t, h, "cass-restart", "timeout"), failures(t, h, "cass-restart", "other"))

	if err := stack.Restart("cassandra"); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	reads := okCount(t, h, "cass-restart", "read")
	inserts := okCount(t, h, "cass-restart", "insert")
	enginetest.WaitFor(t, 120*time.Second, "target up again with new successful ops", func() bool {
		return up() == 1 && okCount(t, h, "cass-restart", "read") >= reads+3 && okCount(t, h, "cass-restart", "insert") >= inserts+3
	})
	t.Logf("target up with new successful ops %s after the node's port reopened", time.Since(restarted).Round(100*time.Millisecond))
	if n := failures(t, h, "cass-restart", "mismatch") + failures(t, h, "cass-restart", "not_found"); n != 0 {
		t.Errorf("%v data failures across a clean restart", n)
	}
}
