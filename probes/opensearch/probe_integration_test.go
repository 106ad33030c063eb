//go:build integration

package opensearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

// One OpenSearch node (test/stack/opensearch.sh) serves every test here.
var osURL string

func TestMain(m *testing.M) {
	env := stack.Must("opensearch")
	osURL = env["DBCANARY_TEST_OPENSEARCH_URL"]
	stack.Exit(m.Run())
}

// rest calls the node directly, behind the canary's back.
func rest(t *testing.T, method, path string, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, osURL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// indices lists every index in the cluster with its document count and uuid,
// so a test can prove nothing outside the canary prefix changed.
func indices(t *testing.T) map[string]string {
	t.Helper()
	status, b := rest(t, http.MethodGet, "/_cat/indices?format=json&h=index,uuid,docs.count&expand_wildcards=all", "")
	if status != 200 {
		t.Fatalf("cat indices: %d %s", status, b)
	}
	var rows []map[string]string
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r["index"]] = r["uuid"] + "/" + r["docs.count"]
	}
	return out
}

// foreign keeps the indices no canary writes (no dbcanary- prefix) and the
// sentinel dbcanary-ops: make test runs other packages at the same time (its
// second lane), whose daemons write canary indices of their own.
func foreign(all map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range all {
		if !strings.HasPrefix(k, "dbcanary-") || k == "dbcanary-ops" {
			out[k] = v
		}
	}
	return out
}

func newProbe(t *testing.T, target, instance string, edit func(*Config)) *Probe {
	t.Helper()
	c := DefaultConfig
	c.Addresses = []string{osURL}
	c.Replicas = 0
	c.RefreshInterval = 200 * time.Millisecond
	if edit != nil {
		edit(&c)
	}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("config: %v", errs)
	}
	pt := probes.Target{Name: target, InstanceID: instance, Config: &c, Logger: enginetest.Logger()}
	enginetest.OpenLedger(t, testLedgers, "opensearch", &pt)
	p, err := New(pt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Prepare(ctx); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	return p
}

func run(t *testing.T, p *Probe, op string) (*probes.Outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := &probes.Outcome{Intended: time.Now()}
	return out, p.Run(ctx, op, out)
}

const engineYAML = `
global:
  instance_id: %s
  timeout: 10s
  max_in_flight: 8
targets:
  - name: %s
    backend: opensearch
    ops:
%s
    opensearch:
      addresses: [%s]
      replicas: 0
      refresh_interval: 200ms
      bulk_size: 5
`

func startEngine(t *testing.T, instance, target, ops string) *enginetest.Harness {
	t.Helper()
	return enginetest.Start(t, fmt.Sprintf(engineYAML, instance, target, enginetest.Indent(ops, 6), osURL))
}

var allOps = []string{OpIndex, OpBulk, OpSearchAll, OpSearchTerm, OpSearchPhrase, OpGet, OpVisibility}

// Every op runs through the real engine, fills its histograms without a
// failure, and nothing outside the canary prefix is touched.
func TestEveryOpFillsHistograms(t *testing.T) {
	rest(t, http.MethodPut, "/other-app-logs", `{"settings":{"number_of_replicas":0}}`)
	rest(t, http.MethodPut, "/other-app-logs/_doc/1?refresh=true", `{"msg":"not the canary's"}`)
	// dbcanary-ops is the prefix without its dash: a canary matching
	// dbcanary-ops* instead of dbcanary-ops-* would touch it.
	rest(t, http.MethodPut, "/dbcanary-ops", `{"settings":{"number_of_replicas":0}}`)
	rest(t, http.MethodPut, "/dbcanary-ops/_doc/1?refresh=true", `{"msg":"next to the canary's prefix"}`)
	before := foreign(indices(t))

	h := startEngine(t, "it-ops", "ops", `
index: {rate: 5}
bulk: {rate: 2}
search_default: {rate: 5}
search_term: {rate: 5}
search_phrase: {rate: 5}
get: {rate: 5}
visibility: {rate: 2}`)
	for _, op := range allOps {
		enginetest.WaitFor(t, 60*time.Second, op+" successes", func() bool {
			return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": op, "result": "ok"}) >= 5
		})
	}
	enginetest.WaitFor(t, 30*time.Second, "visibility phases", func() bool {
		return h.HistogramCount(t, "dbcanary_op_phase_seconds", enginetest.L{"op": OpVisibility, "phase": PhaseVisible}) >= 3
	})
	for _, op := range allOps {
		if f := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"op": op}); f != 0 {
			t.Errorf("%s: %v failures", op, f)
		}
		n := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": op, "result": "ok"})
		sum := h.HistogramSum(t, "dbcanary_op_latency_seconds", enginetest.L{"op": op, "result": "ok"})
		svc := h.HistogramSum(t, "dbcanary_op_service_time_seconds", enginetest.L{"op": op, "result": "ok"})
		t.Logf("figure: %-14s n=%-3d mean latency %6.1f ms, mean service time %6.1f ms", op, n, 1000*sum/float64(n), 1000*svc/float64(n))
	}
	if v := h.Value(t, "dbcanary_op_bytes_total", enginetest.L{"op": OpBulk, "direction": "sent"}); v == 0 {
		t.Error("bulk sent no bytes")
	}
	if v := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "ops"}); v != 1 {
		t.Errorf("target_up = %v", v)
	}
	h.Engine.Stop()
	after := foreign(indices(t))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("indices outside the canary prefix changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, ok := after["dbcanary-ops"]; !ok {
		t.Fatal("the index named like the prefix without its dash is gone")
	}
	if _, ok := after["other-app-logs"]; !ok {
		t.Fatal("the foreign index is gone")
	}
}

// Term and phrase queries find exactly the expected reference documents, and
// another instance's documents in the same index never count as hits.
func TestQueriesFindExactlyExpected(t *testing.T) {
	p := newProbe(t, "queries", "it-q1", nil)
	other := newProbe(t, "queries", "it-q2", nil) // same index, another instance
	for range 3 {
		if _, err := run(t, other, OpBulk); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 * max(len(topics), len(phrases)) {
		for _, op := range []string{OpSearchTerm, OpSearchPhrase, OpSearchAll} {
			if _, err := run(t, p, op); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
	}
	// The instance filter is what keeps the other instance out: without it
	// the same term query finds both reference sets.
	index := p.indexName(time.Now())
	q := fmt.Sprintf(`{"query":{"bool":{"filter":[{"term":{"kind":"ref"}},{"term":{"topic":%q}}]}}}`, topics[0])
	_, b := rest(t, http.MethodPost, "/"+index+"/_search", q)
	var res searchResponse
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	want := 2 * len(expectedTopic(p.refs, topics[0]))
	if res.Hits.Total.Value != want {
		t.Fatalf("unfiltered term query: %d hits, want %d (both instances)", res.Hits.Total.Value, want)
	}
}

// A document altered behind the canary's back is caught as mismatch, both a
// reference document and one the index op wrote.
func TestAlteredDocumentIsMismatch(t *testing.T) {
	p := newProbe(t, "alter", "it-alter", nil)
	index := p.indexName(time.Now())
	ref := p.refs[0]
	ref.Title = "Altered behind the canary's back"
	if s, b := rest(t, http.MethodPut, "/"+index+"/_doc/"+ref.ID, string(mustJSON(ref))); s != 200 {
		t.Fatalf("alter: %d %s", s, b)
	}
	mismatches := 0
	for range 2 * refCount {
		_, err := run(t, p, OpGet)
		switch c := probes.CauseOf(err); c {
		case "":
		case probes.CauseMismatch:
			mismatches++
			if !strings.Contains(err.Error(), "title") {
				t.Fatalf("the mismatch does not name the field: %v", err)
			}
		default:
			t.Fatalf("get: cause %q: %v", c, err)
		}
	}
	if mismatches != 1 {
		t.Fatalf("%d mismatches for one altered reference document, want 1 (it is rewritten after being counted)", mismatches)
	}

	if _, err := run(t, p, OpIndex); err != nil {
		t.Fatal(err)
	}
	d := p.recent[0].doc
	altered := d
	altered.Body = strings.Replace(altered.Body, " ", "  ", 1)
	if s, b := rest(t, http.MethodPut, "/"+index+"/_doc/"+d.ID, string(mustJSON(altered))); s != 200 {
		t.Fatalf("alter: %d %s", s, b)
	}
	_, err := run(t, p, OpGet)
	if probes.CauseOf(err) != probes.CauseMismatch || !strings.Contains(err.Error(), "body") {
		t.Fatalf("get of an altered document: cause %q: %v", probes.CauseOf(err), err)
	}
	if s, b := rest(t, http.MethodDelete, "/"+index+"/_doc/"+d.ID, ""); s != 200 {
		t.Fatalf("delete doc: %d %s", s, b)
	}
	_, err = run(t, p, OpGet)
	if probes.CauseOf(err) != probes.CauseNotFound || errors.Is(err, probes.ErrNamespaceGone) {
		t.Fatalf("get of a deleted document: cause %q: %v", probes.CauseOf(err), err)
	}
}

// The visibility op measures the refresh lag: with refresh_interval 1s each
// lag is between 0 and about 1s; the bounds are generous for a busy machine.
func TestVisibilityFollowsRefreshInterval(t *testing.T) {
	p := newProbe(t, "visible", "it-vis", func(c *Config) { c.RefreshInterval = time.Second })
	var lags []time.Duration
	for range 8 {
		out, err := run(t, p, OpVisibility)
		if err != nil {
			t.Fatal(err)
		}
		for _, ph := range out.Phases() {
			if ph.Name == PhaseVisible {
				lags = append(lags, ph.Duration)
			}
		}
	}
	if len(lags) != 8 {
		t.Fatalf("%d visible phases for 8 ops", len(lags))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	var sum time.Duration
	for _, l := range lags {
		sum += l
	}
	t.Logf("figure: refresh_interval 1s: visible lag min %s median %s max %s mean %s", lags[0], lags[4], lags[7], sum/8)
	if lags[7] < 150*time.Millisecond || lags[7] > 4*time.Second {
		t.Fatalf("max lag %s is not of the order of a 1s refresh interval", lags[7])
	}

	// A bound shorter than any refresh makes the op fail.
	slow := newProbe(t, "visible", "it-vis2", func(c *Config) {
		c.RefreshInterval = 30 * time.Second
		c.IndexPrefix = "dbcanary-visible-slow-"
		c.VisibilityTimeout = 500 * time.Millisecond
	})
	_, err := run(t, slow, OpVisibility)
	if probes.CauseOf(err) != probes.CauseTimeout || !strings.Contains(err.Error(), "not searchable within") {
		t.Fatalf("cause %q: %v", probes.CauseOf(err), err)
	}
}

// An index deleted behind the canary's back is reported (cause not_found)
// and recreated, and the ops succeed again.
func TestDeletedIndexIsRecreated(t *testing.T) {
	h := startEngine(t, "it-gone", "gone", `
index: {rate: 5}
search_term: {rate: 5}`)
	enginetest.WaitFor(t, 30*time.Second, "first successes", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": OpIndex, "result": "ok"}) >= 3
	})
	index := "dbcanary-gone-" + time.Now().UTC().Format(dayLayout)
	if s, b := rest(t, http.MethodDelete, "/"+index, ""); s != 200 {
		t.Fatalf("delete index: %d %s", s, b)
	}
	enginetest.WaitFor(t, 30*time.Second, "a not_found failure", func() bool {
		return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"cause": string(probes.CauseNotFound)}) >= 1
	})
	okBefore := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": OpSearchTerm, "result": "ok"})
	enginetest.WaitFor(t, 30*time.Second, "successes after the recreation", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": OpSearchTerm, "result": "ok"}) >= okBefore+5
	})
	if _, ok := indices(t)[index]; !ok {
		t.Fatalf("index %s was not recreated", index)
	}
	status, b := rest(t, http.MethodGet, "/"+index+"/_mapping", "")
	if status != 200 || !strings.Contains(string(b), `"dynamic":"strict"`) {
		t.Fatalf("the recreated index does not have the canary mapping: %d %s", status, b)
	}
	for _, c := range []probes.Cause{probes.CauseMismatch, probes.CauseOther} {
		if v := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"cause": string(c)}); v != 0 {
			t.Errorf("%v failures with cause %s", v, c)
		}
	}
	// An op that reaches the node in the instant the index is deleted or
	// recreated may get a shard failure: the canary reports what the client
	// saw (server), once or twice, never a stream of them.
	if v := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"cause": string(probes.CauseServer)}); v > 2 {
		t.Errorf("%v failures with cause server around the deletion", v)
	} else if v > 0 {
		t.Logf("%v op(s) raced the deletion and got a server error", v)
	}
}

// Indices of the prefix older than retention are deleted; nothing else is.
func TestRetentionDeletesOnlyOldCanaryIndices(t *testing.T) {
	mk := func(name string) {
		rest(t, http.MethodDelete, "/"+name, "") // left over from an interrupted run
		if s, b := rest(t, http.MethodPut, "/"+name, `{"settings":{"number_of_replicas":0}}`); s != 200 {
			t.Fatalf("create %s: %d %s", name, s, b)
		}
	}
	// A bench run's index (<prefix>bench-<run>-<day>) left by a crash goes too.
	old := []string{"dbcanary-ret-2020.01.01", "dbcanary-ret-bench-k3x9a1-2020.01.01"}
	yesterday := "dbcanary-ret-" + time.Now().UTC().Add(-24*time.Hour).Format(dayLayout)
	keep := []string{yesterday, "dbcanary-ret-notadate", "dbcanary-ret-x-2020.01.01", "other-2020.01.01", "dbcanary-retention-2020.01.01",
		"dbcanary-ret-bench-k3x9a1-" + time.Now().UTC().Format(dayLayout), "dbcanary-ret-bench-k3_x9-2020.01.01", "dbcanary-ret-bench-toolongrun-2020.01.01"}
	for _, n := range append(old, keep...) {
		mk(n)
	}
	t.Cleanup(func() {
		for _, n := range keep {
			rest(t, http.MethodDelete, "/"+n, "")
		}
	})
	newProbe(t, "ret", "it-ret", nil) // Prepare sweeps
	all := indices(t)
	for _, n := range old {
		if _, ok := all[n]; ok {
			t.Fatalf("%s is past retention and still there", n)
		}
	}
	for _, n := range keep {
		if _, ok := all[n]; !ok {
			t.Fatalf("%s was deleted", n)
		}
	}
}
