//go:build integration

package opensearch

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
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

// privateNode is an OpenSearch node of this test's own (own directory and
// ports, started by test/stack/opensearch.sh), for tests that stop a node:
// the shared one on 9200 is never touched.
type privateNode struct {
	dir             string
	http, transport int
	url             string
}

func startPrivateNode(t *testing.T) *privateNode {
	t.Helper()
	dir, err := os.MkdirTemp("", "dbcanary-os-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the node runs as an unprivileged user
		t.Fatal(err)
	}
	n := &privateNode{dir: dir, http: freePort(t), transport: freePort(t)}
	t.Cleanup(func() {
		if out, err := n.script("stop"); err != nil {
			t.Errorf("stop private node: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	if out, err := n.script("start"); err != nil {
		t.Fatalf("start private node: %v\n%s", err, out)
	}
	out, err := n.script("env")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && k == "DBCANARY_TEST_OPENSEARCH_URL" {
			n.url = v
		}
	}
	return n
}

func freePort(t *testing.T) int { t.Helper(); return stack.FreePort(t) }

func (n *privateNode) script(action string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(stack.Dir(), "opensearch.sh"), action)
	cmd.Env = append(os.Environ(), "DBCANARY_STACK_DIR="+n.dir,
		fmt.Sprintf("DBCANARY_OPENSEARCH_PORT=%d", n.http), fmt.Sprintf("DBCANARY_OPENSEARCH_TRANSPORT_PORT=%d", n.transport))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Stopping the node makes the target go down; the engine keeps running and
// the target comes back when the node does.
func TestNodeRestart(t *testing.T) {
	n := startPrivateNode(t)
	h := enginetest.Start(t, fmt.Sprintf(engineYAML, "it-restart", "restart", enginetest.Indent("index: {rate: 5}\nget: {rate: 5}", 6), n.url))
	enginetest.WaitFor(t, 30*time.Second, "target up", func() bool {
		return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "restart"}) == 1 &&
			h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": OpIndex, "result": "ok"}) >= 3
	})
	t0 := time.Now()
	if out, err := n.script("stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	enginetest.WaitFor(t, 30*time.Second, "target down", func() bool {
		return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "restart"}) == 0
	})
	down := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "restart", "cause": string(probes.CauseRefused)}) +
		h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "restart", "cause": string(probes.CauseTimeout)})
	if down == 0 {
		t.Fatal("no refused or timeout failure while the node is down")
	}
	t.Logf("figure: target down %s after the stop began", time.Since(t0).Round(100*time.Millisecond))
	t1 := time.Now()
	if out, err := n.script("start"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	t.Logf("figure: node restarted in %s", time.Since(t1).Round(100*time.Millisecond))
	okBefore := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": OpIndex, "result": "ok"})
	enginetest.WaitFor(t, 60*time.Second, "target up again", func() bool {
		return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "restart"}) == 1 &&
			h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": OpIndex, "result": "ok"}) >= okBefore+3
	})
	t.Logf("figure: ops succeed again %s after the restart began", time.Since(t1).Round(100*time.Millisecond))
}
