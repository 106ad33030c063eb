//go:build integration

package cassandra_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/test/stack"
)

// privateNode is a Cassandra node of this test's own (own directory, CQL and
// storage ports, a cluster of its own), started by test/stack/cassandra.sh,
// for tests that stop a node: the shared one on 9042 is never touched.
type privateNode struct {
	dir         string
	cql, gossip int
	env         stack.Env
	extraEnv    []string // more DBCANARY_CASSANDRA_* settings for the script
}

func startPrivateNode(t *testing.T, extraEnv ...string) *privateNode {
	t.Helper()
	dir, err := os.MkdirTemp("", "dbcanary-cass-")
	if err != nil {
		t.Fatal(err)
	}
	n := &privateNode{dir: dir, cql: freePort(t), gossip: freePort(t), extraEnv: extraEnv}
	t.Cleanup(func() {
		if out, err := n.script("stop"); err != nil {
			t.Errorf("stop private node: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	n.start(t)
	out, err := n.script("env")
	if err != nil {
		t.Fatal(err)
	}
	n.env = stack.Env{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			n.env[k] = v
		}
	}
	return n
}

func freePort(t *testing.T) int { t.Helper(); return stack.FreePort(t) }

func (n *privateNode) script(action string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(stack.Dir(), "cassandra.sh"), action)
	cmd.Env = append(os.Environ(), "DBCANARY_STACK_DIR="+n.dir, "DBCANARY_CASSANDRA_HEAP_MAX=512M",
		fmt.Sprintf("DBCANARY_CASSANDRA_PORT=%d", n.cql), fmt.Sprintf("DBCANARY_CASSANDRA_STORAGE_PORT=%d", n.gossip))
	cmd.Env = append(cmd.Env, n.extraEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (n *privateNode) start(t *testing.T) {
	t.Helper()
	if out, err := n.script("start"); err != nil {
		t.Fatalf("start private node: %v\n%s", err, out)
	}
}

// TestNodeRestart stops the node under a running engine: the target goes
// down, and comes back after the node restarts, without restarting dbcanary.
func TestNodeRestart(t *testing.T) {
	n := startPrivateNode(t)
	cass := fmt.Sprintf("hosts: [%q]\nport: %d\nusername: %s\npassword_file: %s\nlocal_dc: %s\nkeyspace: dbcanary_it\nreplication: {class: SimpleStrategy, replication_factor: 1}\nrequest_timeout: 3s\nreconnect_interval: 1s\n",
		n.env["DBCANARY_TEST_CASSANDRA_HOST"], n.cql, n.env["DBCANARY_TEST_CASSANDRA_USER"], n.env["DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"], n.env["DBCANARY_TEST_CASSANDRA_DC"])
	h := enginetest.Start(t, engineConfig("rs", "cass-restart", "insert: {rate: 4}\nread: {rate: 4}", cass))
	up := func() float64 { return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "cass-restart"}) }
	enginetest.WaitFor(t, 60*time.Second, "reads before the outage", func() bool { return okCount(t, h, "cass-restart", "read") >= 3 })

	if out, err := n.script("stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	enginetest.WaitFor(t, 60*time.Second, "target down", func() bool { return up() == 0 })
	down := failures(t, h, "cass-restart", "refused") + failures(t, h, "cass-restart", "timeout")
	if down == 0 {
		t.Errorf("no refused or timeout failure while the node was down")
	}
	t.Logf("while down: refused %v, timeout %v, other %v", failures(t, h, "cass-restart", "refused"),
		failures(t, h, "cass-restart", "timeout"), failures(t, h, "cass-restart", "other"))

	n.start(t)
	restarted := time.Now()
	reads := okCount(t, h, "cass-restart", "read")
	inserts := okCount(t, h, "cass-restart", "insert")
	enginetest.WaitFor(t, 120*time.Second, "target up again with new successful ops", func() bool {
		return up() == 1 && okCount(t, h, "cass-restart", "read") >= reads+3 && okCount(t, h, "cass-restart", "insert") >= inserts+3
	})
	t.Logf("target up with new successful ops %s after the node's port reopened", time.Since(restarted).Round(100*time.Millisecond))
	if n := failures(t, h, "cass-restart", "mismatch") + failures(t, h, "cass-restart", "not_found") + failures(t, h, "cass-restart", "stale"); n != 0 {
		t.Errorf("%v data failures across a clean restart", n)
	}
}
