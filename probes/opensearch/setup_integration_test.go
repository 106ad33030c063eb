//go:build integration

package opensearch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

// unprepared builds a probe without running Prepare.
func unprepared(t *testing.T, target, instance string, ephemeral bool) *Probe {
	t.Helper()
	c := DefaultConfig
	c.Addresses = []string{osURL}
	c.Replicas = 0
	c.RefreshInterval = 200 * time.Millisecond
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("config: %v", errs)
	}
	p, err := New(probes.Target{Name: target, InstanceID: instance, Ephemeral: ephemeral, Config: &c, Logger: enginetest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func prepare(t *testing.T, p *Probe) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.Prepare(ctx)
}

// mustREST calls the node behind the canary's back and fails on an unexpected status.
func mustREST(t *testing.T, method, path, body string, ok ...int) {
	t.Helper()
	s, b := rest(t, method, path, body)
	for _, o := range ok {
		if s == o {
			return
		}
	}
	t.Fatalf("%s %s: %d %s", method, path, s, b)
}

// TestIndexTheCanaryCannotUseIsSetup installs, on the real node, index
// templates matching the canary prefix that make the index unusable for the
// canary, and an index auto-created by a stray write: each fails Prepare with
// cause setup (a page for a misconfiguration), never as data loss. Once the
// template is removed and the index deleted, the canary recreates it.
func TestIndexTheCanaryCannotUseIsSetup(t *testing.T) {
	today := time.Now().UTC().Format(dayLayout)
	cases := []struct {
		name     string
		template string // the index template's "template" body; "" for none
		stray    bool   // a document auto-creates the day's index first
		want     string
	}{
		{name: "fields-limit", template: `{"settings":{"index.mapping.total_fields.limit":3}}`, want: "Limit of total fields [3]"},
		{name: "no-source", template: `{"mappings":{"_source":{"enabled":false}}}`, want: "_source is disabled"},
		{name: "pipeline", template: `{"settings":{"index.default_pipeline":"dbcanary-missing-pipeline"}}`, want: "pipeline with id [dbcanary-missing-pipeline] does not exist"},
		{name: "auto-created", stray: true, want: "field instance is text, want keyword"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := "tmpl-" + tc.name
			prefix := "dbcanary-" + target + "-"
			index := prefix + today
			rest(t, http.MethodDelete, "/"+index, "")
			t.Cleanup(func() { rest(t, http.MethodDelete, "/"+index, "") })
			if tc.template != "" {
				mustREST(t, http.MethodPut, "/_index_template/"+target, fmt.Sprintf(`{"index_patterns":[%q],"priority":900,"template":%s}`, prefix+"*", tc.template), 200)
				t.Cleanup(func() { rest(t, http.MethodDelete, "/_index_template/"+target, "") })
			}
			if tc.stray {
				mustREST(t, http.MethodPut, "/"+index+"/_doc/stray?refresh=true", `{"instance":"it-tmpl","seq":1,"note":"written by something else"}`, 201)
			}
			p := unprepared(t, target, "it-tmpl", false)
			err := prepare(t, p)
			if c := probes.CauseOf(err); c != probes.CauseSetup {
				t.Fatalf("prepare: cause %q, want setup: %v", c, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error lacks %q: %v", tc.want, err)
			}
			t.Logf("%s: %v", tc.name, err)
			// Every op reports the same until it is fixed; none is a data-integrity failure.
			for _, op := range []string{OpIndex, OpGet, OpSearchTerm, OpSearchAll} {
				_, err := run(t, p, op)
				if c := probes.CauseOf(err); c != probes.CauseSetup {
					t.Fatalf("%s: cause %q, want setup: %v", op, c, err)
				}
			}

			// Fixed as the message says: template removed, index deleted.
			rest(t, http.MethodDelete, "/_index_template/"+target, "")
			mustREST(t, http.MethodDelete, "/"+index, "", 200, 404)
			if err := prepare(t, p); err != nil {
				t.Fatalf("prepare after the fix: %v", err)
			}
			for _, op := range []string{OpIndex, OpGet, OpSearchTerm, OpSearchAll} {
				if _, err := run(t, p, op); err != nil {
					t.Fatalf("%s after the fix: %v", op, err)
				}
			}
		})
	}
}

// TestBlockedIndexIsServer: an index blocked for writes (by an operator, or
// by the disk flood-stage watermark) answers 403 or 429 with a
// cluster_block_exception: an operational failure (server), not setup.
func TestBlockedIndexIsServer(t *testing.T) {
	p := newProbe(t, "blocked", "it-block", nil)
	index := p.indexName(time.Now())
	t.Cleanup(func() {
		rest(t, http.MethodPut, "/"+index+"/_settings", `{"index.blocks.write":null,"index.blocks.read_only_allow_delete":null}`)
	})
	for _, block := range []string{"index.blocks.write", "index.blocks.read_only_allow_delete"} {
		mustREST(t, http.MethodPut, "/"+index+"/_settings", fmt.Sprintf(`{%q:true}`, block), 200)
		_, err := run(t, p, OpIndex)
		if c := probes.CauseOf(err); c != probes.CauseServer || !strings.Contains(err.Error(), "cluster_block_exception") {
			t.Fatalf("%s: cause %q, want server: %v", block, c, err)
		}
		t.Logf("%s: %v", block, err)
		mustREST(t, http.MethodPut, "/"+index+"/_settings", fmt.Sprintf(`{%q:null}`, block), 200)
	}
	if _, err := run(t, p, OpIndex); err != nil {
		t.Fatalf("index after the blocks were lifted: %v", err)
	}
}

// TestSearchDefaultExpectsTheReferenceSet: search_default must find exactly
// this instance's reference documents, however many documents the write ops
// added: one reference document deleted, or one added behind the canary's
// back, is a mismatch (reported once: the reference set is rewritten).
func TestSearchDefaultExpectsTheReferenceSet(t *testing.T) {
	p := newProbe(t, "searchall", "it-sall", nil)
	index := p.indexName(time.Now())
	for range 4 {
		if _, err := run(t, p, OpBulk); err != nil { // 40 documents: more than the reference set
			t.Fatal(err)
		}
	}
	mustREST(t, http.MethodPost, "/"+index+"/_refresh", "", 200)
	if _, err := run(t, p, OpSearchAll); err != nil {
		t.Fatalf("search_default on an intact index: %v", err)
	}

	gone := p.refs[3].ID
	mustREST(t, http.MethodDelete, "/"+index+"/_doc/"+gone+"?refresh=true", "", 200)
	_, err := run(t, p, OpSearchAll)
	if probes.CauseOf(err) != probes.CauseMismatch || !strings.Contains(err.Error(), "missing "+gone) {
		t.Fatalf("search_default with reference document %s deleted: cause %q: %v", gone, probes.CauseOf(err), err)
	}
	if _, err := run(t, p, OpSearchAll); err != nil {
		t.Fatalf("search_default after the reference set was rewritten: %v", err)
	}

	extra := refDoc("it-sall", 99)
	mustREST(t, http.MethodPut, "/"+index+"/_doc/"+extra.ID+"?refresh=true", string(mustJSON(extra)), 201)
	t.Cleanup(func() { rest(t, http.MethodDelete, "/"+index+"/_doc/"+extra.ID, "") })
	_, err = run(t, p, OpSearchAll)
	if probes.CauseOf(err) != probes.CauseMismatch || !strings.Contains(err.Error(), "unexpected "+extra.ID) {
		t.Fatalf("search_default with an extra reference document: cause %q: %v", probes.CauseOf(err), err)
	}
}

// TestEphemeralDeletesItsDocuments: a one-shot run's probe deletes the
// documents it wrote when it closes; a daemon's probe keeps them.
func TestEphemeralDeletesItsDocuments(t *testing.T) {
	count := func(instance string) int {
		t.Helper()
		mustREST(t, http.MethodPost, "/dbcanary-once-*/_refresh", "", 200)
		s, b := rest(t, http.MethodPost, "/dbcanary-once-*/_count", fmt.Sprintf(`{"query":{"term":{"instance":%q}}}`, instance))
		if s != 200 {
			t.Fatalf("count: %d %s", s, b)
		}
		var res struct {
			Count int `json:"count"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		return res.Count
	}
	for _, ephemeral := range []bool{true, false} {
		instance := fmt.Sprintf("it-once-%v-%d", ephemeral, time.Now().UnixNano()%1e9)
		p := unprepared(t, "once", instance, ephemeral)
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{OpIndex, OpBulk, OpVisibility} {
			if _, err := run(t, p, op); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
		before := count(instance)
		if err := p.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		after := count(instance)
		t.Logf("ephemeral=%v: %d documents before Close, %d after", ephemeral, before, after)
		if want := refCount + 1 + p.cfg.BulkSize + 1; before != want {
			t.Errorf("%d documents before Close, want %d", before, want)
		}
		if ephemeral && after != 0 || !ephemeral && after != before {
			t.Errorf("ephemeral=%v: %d documents left of %d", ephemeral, after, before)
		}
	}
}

// TestBenchRunHasIndicesOfItsOwn: a bench run (opensearch-pmc's Configure)
// writes into an index of its own, created empty, and deletes it whole at
// Close; the canary's daily index of the same prefix is not written.
func TestBenchRunHasIndicesOfItsOwn(t *testing.T) {
	daily := "dbcanary-benchrun-" + time.Now().UTC().Format(dayLayout)
	before := indices(t)[daily]
	c := DefaultConfig
	c.Addresses = []string{osURL}
	c.Replicas = 0
	c.RefreshInterval = 200 * time.Millisecond
	cfg, err := pmcProfile().Configure(&c, probes.BenchParams{Values: map[string]string{"bulk-size": "50"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(probes.Target{Name: "benchrun", InstanceID: fmt.Sprintf("it-bench-%d", time.Now().UnixNano()%1e9), Ephemeral: true, Config: cfg, Logger: enginetest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	own := "dbcanary-benchrun-bench-" + p.run + "-" + time.Now().UTC().Format(dayLayout)
	for range 3 {
		if _, err := run(t, p, OpBulk); err != nil {
			t.Fatalf("bulk: %v", err)
		}
	}
	for _, op := range []string{OpSearchAll, OpSearchTerm, OpSearchPhrase} {
		if _, err := run(t, p, op); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	mustREST(t, http.MethodPost, "/"+own+"/_refresh", "", 200)
	all := indices(t)
	n, ok := all[own]
	if !ok {
		t.Fatalf("the bench run's index %s does not exist (indices: %v)", own, all)
	}
	if want := fmt.Sprintf("/%d", refCount+3*50); !strings.HasSuffix(n, want) {
		t.Errorf("%s: uuid/docs %s, want %d documents", own, n, refCount+3*50)
	}
	if all[daily] != before {
		t.Errorf("the daily canary index %s changed: %q, before %q", daily, all[daily], before)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, ok := indices(t)[own]; ok {
		t.Errorf("%s is still there after Close", own)
	}
}
