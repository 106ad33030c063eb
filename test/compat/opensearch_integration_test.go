//go:build integration

package compat

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/opensearch"
)

// openSearchYAML is a one-target config with the probe's defaults.
func openSearchYAML(target, url, ops string, extra ...string) string {
	more := ""
	for _, e := range extra {
		more += "\n      " + e
	}
	return fmt.Sprintf(`
global: {instance_id: compat-1, timeout: 30s, max_in_flight: 8}
targets:
  - name: %s
    backend: opensearch
    ops: {%s}
    opensearch:
      addresses: [%s]%s
`, target, ops, url, more)
}

// openSearchProbe builds the opensearch probe of a one-target config.
func openSearchProbe(t *testing.T, yaml string) probes.Probe {
	t.Helper()
	cfg := enginetest.Parse(t, yaml)
	tg := cfg.Targets[0]
	p, err := opensearch.New(probes.Target{Name: tg.Name, InstanceID: "compat-1", Config: tg.Probe, Logger: enginetest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// putSettings applies transient cluster settings as the test (not the canary).
func putSettings(t *testing.T, url, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url+"/_cluster/settings", strings.NewReader(body))
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
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"acknowledged":true`)) {
		t.Fatalf("PUT _cluster/settings %s: HTTP %d %s", body, resp.StatusCode, b)
	}
}

// TestOpenSearch13 is OpenSearch 1.3.20 (the integ-test zip from Maven
// Central; the API generation of OpenDistro 1.13, which the reference
// deployment ran), a private node on ports of its own: every op at the
// probe's defaults, the durability ledger, and a 429 from the node's own
// circuit breaker classified as the store's overload.
func TestOpenSearch13(t *testing.T) {
	env := startPrivate(t, "opensearch", "opensearch-1.3.20", "DBCANARY_OPENSEARCH_VERSION=1.3.20",
		"DBCANARY_OPENSEARCH_PORT=19620", "DBCANARY_OPENSEARCH_TRANSPORT_PORT=19720")
	url := env.Get(t, "DBCANARY_TEST_OPENSEARCH_URL")
	if v := env.Get(t, "DBCANARY_TEST_OPENSEARCH_VERSION"); v != "1.3.20" {
		t.Fatalf("the node is %s, want 1.3.20", v)
	}
	openSearchRow(t, "os13", url)
}

// openSearchRow is what every OpenSearch version gets.
func openSearchRow(t *testing.T, name, url string) {
	t.Run("every op", func(t *testing.T) {
		everyOp(t, openSearchYAML(name, url, `"*": {rate: 1}, ledger_write: {rate: 0}, ledger_check: {rate: 0}`), 3, 3*time.Minute)
	})
	t.Run("ledger", func(t *testing.T) {
		ledgerRow(t, openSearchYAML(name+"-ledger", url, ledgerOps, "ledger: {ages: [10s]}"), name+"-ledger")
	})
	t.Run("429 circuit breaker", func(t *testing.T) { circuitBreaker429(t, name, url) })
}

// circuitBreaker429: with the in-flight requests circuit breaker set to one
// byte (a dynamic cluster setting), the node refuses every request with a
// body with 429 circuit_breaking_exception. The canary must call that the
// store's overload, with the breaker's name and the node's reason, as cause
// server (never a timeout, never data loss), and be ok once the limit is back.
func circuitBreaker429(t *testing.T, name, url string) {
	p := openSearchProbe(t, openSearchYAML(name+"-429", url, ""))
	if err := prepare(p, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := runOp(p, opensearch.OpIndex, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	putSettings(t, url, `{"transient":{"network.breaker.inflight_requests.limit":"1b"}}`)
	reset := func() { putSettings(t, url, `{"transient":{"network.breaker.inflight_requests.limit":null}}`) }
	t.Cleanup(reset)
	for _, op := range []string{opensearch.OpIndex, opensearch.OpBulk, opensearch.OpSearchTerm} {
		err := runOp(p, op, 30*time.Second)
		if probes.CauseOf(err) != probes.CauseServer {
			t.Fatalf("%s with the in-flight breaker at 1b: cause %q, %v; want server", op, probes.CauseOf(err), err)
		}
		for _, want := range []string{"HTTP 429", "circuit_breaking_exception", "[in_flight_requests] Data too large", "the in_flight_requests circuit breaker tripped: the store is overloaded"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s with the in-flight breaker at 1b: %v; want it to say %q", op, err, want)
			}
		}
		t.Logf("%s: %v", op, err)
	}
	reset()
	for _, op := range []string{opensearch.OpIndex, opensearch.OpBulk, opensearch.OpSearchTerm} {
		if err := runOp(p, op, 30*time.Second); err != nil {
			t.Fatalf("%s once the breaker's limit is back: %v", op, err)
		}
	}
}

// TestOpenSearchIndexingPressure429 is the other kind of 429 a node sheds
// load with, rejected execution: a private OpenSearch 2.19.6 (the version
// make test runs) whose indexing-pressure limit (a static node setting) is one
// byte rejects every write at the coordinating node with 429
// rejected_execution_exception. The canary must call that the store's
// overload (indexing pressure), cause server, with the node's reason.
func TestOpenSearchIndexingPressure429(t *testing.T) {
	env := startPrivate(t, "opensearch", "opensearch-2.19.6-pressure", "DBCANARY_OPENSEARCH_VERSION=2.19.6",
		"DBCANARY_OPENSEARCH_PORT=19621", "DBCANARY_OPENSEARCH_TRANSPORT_PORT=19721",
		"DBCANARY_OPENSEARCH_SETTINGS=indexing_pressure.memory.limit: 1b")
	url := env.Get(t, "DBCANARY_TEST_OPENSEARCH_URL")
	p := openSearchProbe(t, openSearchYAML("os-pressure", url, ""))
	check := func(what string, err error) {
		t.Helper()
		if probes.CauseOf(err) != probes.CauseServer {
			t.Fatalf("%s with indexing pressure at 1b: cause %q, %v; want server", what, probes.CauseOf(err), err)
		}
		for _, want := range []string{"429", "rejected_execution_exception", "rejected execution of coordinating operation", "indexing pressure: too many bytes of indexing in flight on the node: the store is overloaded"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s with indexing pressure at 1b: %v; want it to say %q", what, err, want)
			}
		}
		t.Logf("%s: %v", what, err)
	}
	if err := prepare(p, 60*time.Second); err != nil {
		check("prepare", err) // its reference documents are a write too
	}
	for _, op := range []string{opensearch.OpIndex, opensearch.OpBulk} {
		check(op, runOp(p, op, 30*time.Second))
	}
}
