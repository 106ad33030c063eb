//go:build integration

package opensearch

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/probes"
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

// put sends a PUT with a JSON body to the private node.
func (n *privateNode) put(t *testing.T, path, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, n.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s: %d %s", path, resp.StatusCode, b)
	}
}

// kill9 kills the node's JVM with SIGKILL and waits until it is gone.
func (n *privateNode) kill9(t *testing.T) {
	t.Helper()
	stack.Kill9(t, stack.PIDFile(t, filepath.Join(n.dir, "opensearch", "opensearch.pid")), "the private OpenSearch node")
}

// TestLedgerTranslogKill9 is issue 12's OpenSearch proof, on a node of its
// own: documents the index API acknowledged into an index with
// index.translog.durability: async and a 120s sync interval (set by an index
// template on that target's prefix) are gone after kill -9 and restart, and
// the ledger reports them missing; with the default durability request (the
// translog fsynced before each acknowledgement) none is.
func TestLedgerTranslogKill9(t *testing.T) {
	n := startPrivateNode(t)
	n.put(t, "/_index_template/dbcanary-ledger-async", `{"index_patterns": ["dbcanary-ledger-async-*"], "priority": 500,
		"template": {"settings": {"index.translog.durability": "async", "index.translog.sync_interval": "120s"}}}`)
	const writes = 20
	probe := func(target string) *Probe {
		return newProbe(t, target, "it-ledger", func(c *Config) {
			c.Addresses = []string{n.url}
			c.Ledger.Ages = []time.Duration{10 * time.Second}
		})
	}
	async, request := probe("ledger-async"), probe("ledger-request")
	for _, p := range []*Probe{async, request} {
		for range writes {
			if _, err := run(t, p, probes.OpLedgerWrite); err != nil {
				t.Fatalf("%s ledger_write: %v", p.target, err)
			}
		}
	}
	n.kill9(t)
	start := time.Now()
	if out, err := n.script("start"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	t.Logf("node killed with SIGKILL and started again in %s", time.Since(start).Round(time.Millisecond))
	deadline := time.Now().Add(90 * time.Second)
	for _, p := range []*Probe{async, request} {
		for len(p.Ledger().Entries()) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: ledger still holds %d entries", p.target, len(p.Ledger().Entries()))
			}
			if _, err := run(t, p, probes.OpLedgerCheck); err != nil {
				if probes.CauseOf(err).DataCause() {
					t.Logf("%s ledger_check: %.300s", p.target, err)
				} else {
					t.Logf("%s ledger_check (retried): %.300s", p.target, err)
				}
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	got := ledgerCounts(t, "ledger-async")
	stack.Figure(t, "OpenSearch ledger, index.translog.durability: async (sync_interval 120s), %d documents acknowledged, kill -9: missing %v, intact %v, corrupted %v",
		writes, got["missing"], got["intact"], got["corrupted"])
	if got["missing"] == 0 || got["missing"]+got["intact"] != writes || got["corrupted"] != 0 {
		t.Errorf("async: checks %v, want acknowledged documents missing after kill -9", got)
	}
	got = ledgerCounts(t, "ledger-request")
	stack.Figure(t, "OpenSearch ledger, index.translog.durability: request, %d documents acknowledged, kill -9: missing %v, intact %v, corrupted %v",
		writes, got["missing"], got["intact"], got["corrupted"])
	if got["missing"] != 0 || got["intact"] != writes || got["corrupted"] != 0 {
		t.Errorf("request: checks %v, want all %d intact", got, writes)
	}
}
