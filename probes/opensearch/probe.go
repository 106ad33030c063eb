package opensearch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/dbcanary/dbcanary/probes"
)

// Probe is the OpenSearch canary for one target.
type Probe struct {
	cfg       Config
	target    string
	instance  string
	ephemeral bool // a one-shot run: Close deletes its documents
	prefix    string
	run       string // random per process: op document ids never collide with an earlier run's
	refs      []Document
	refIDs    []string // sorted
	client    *opensearchapi.Client
	nodes     *nodeWatch // dbcanary_store_node_up (nodes.go)
	logger    *slog.Logger
	now       func() time.Time

	mu      sync.Mutex // guards index creation and the fields below
	index   string     // today's index, once ensured
	ensured map[string]bool

	recreated atomic.Int64 // indices found deleted behind our back and recreated
	seq       atomic.Uint64
	turn      atomic.Uint64 // round-robin over topics, phrases and documents to get

	ledger *probes.Ledger

	recentMu sync.Mutex
	recent   [64]stored // documents this process indexed, for the get op
	nrecent  int
}

type stored struct {
	index string
	doc   Document
}

// New builds the probe; it does no I/O.
func New(t probes.Target) (*Probe, error) {
	cfg := *t.Config.(*Config)
	prefix := cfg.IndexPrefix
	if prefix == "" {
		prefix = "dbcanary-" + strings.ToLower(t.Name) + "-"
	}
	p := &Probe{
		cfg:       cfg,
		target:    t.Name,
		instance:  t.InstanceID,
		ephemeral: t.Ephemeral,
		prefix:    prefix,
		run:       strconv.FormatUint(rand.Uint64()&0xffffffffff, 36),
		refs:      refDocs(t.InstanceID),
		logger:    t.Logger,
		ledger:    t.Ledger,
		now:       time.Now,
		ensured:   map[string]bool{},
	}
	if p.ownIndices() {
		p.prefix += benchInfix + p.run + "-"
	}
	for _, d := range p.refs {
		p.refIDs = append(p.refIDs, d.ID)
	}
	sort.Strings(p.refIDs)
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TLS.InsecureSkipVerify {
		p.logger.Warn("TLS certificate verification is disabled for this target (tls.insecure_skip_verify)")
	}
	client, tr, err := newClient(&p.cfg, func(r *http.Request) { _ = p.authorize(r) }, t.Certs)
	if err != nil {
		return nil, fmt.Errorf("opensearch client: %w", err)
	}
	p.client = client
	p.nodes = p.newNodeWatch(tr)
	return p, nil
}

// Prefix returns the canary index name prefix.
func (p *Probe) Prefix() string { return p.prefix }

// Recreated returns how many canary indices were found deleted and recreated.
func (p *Probe) Recreated() int64 { return p.recreated.Load() }

// Prepare creates today's index with its mapping (or checks it), writes the
// reference set and deletes this prefix's indices past retention.
func (p *Probe) Prepare(ctx context.Context) error {
	p.nodes.start() // once: the nodes are watched from the first attempt on, even if it fails
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ensureIndex(ctx, p.indexName(now)); err != nil {
		return err
	}
	if err := p.sweep(ctx, now); err != nil {
		// Retention is housekeeping: a user without delete rights still gets a working canary.
		p.logger.Warn("cannot delete canary indices past retention", "err", err)
	}
	return nil
}

// Run implements probes.Probe. A failed op of a target with several
// addresses names the node(s) its requests went to (served.go).
func (p *Probe) Run(ctx context.Context, op string, out *probes.Outcome) error {
	ctx, served := probes.WithNodeTrail(ctx)
	if err := p.runOp(ctx, op, out); err != nil {
		return nameServedNodes(err, served.List(), len(p.cfg.Addresses))
	}
	return nil
}

func (p *Probe) runOp(ctx context.Context, op string, out *probes.Outcome) error {
	index, err := p.current(ctx)
	if err != nil {
		return err
	}
	switch op {
	case OpIndex:
		return p.indexOne(ctx, index, out)
	case OpBulk:
		return p.bulk(ctx, index, out)
	case OpSearchAll:
		return p.searchAll(ctx, index, out)
	case OpSearchTerm:
		return p.searchTerm(ctx, index, out)
	case OpSearchPhrase:
		return p.searchPhrase(ctx, index, out)
	case OpGet:
		return p.get(ctx, index, out)
	case OpVisibility:
		return p.visibility(ctx, index, out)
	case probes.OpLedgerWrite:
		return p.ledgerWrite(ctx, index, out)
	case probes.OpLedgerCheck:
		return p.ledgerCheck(ctx, out)
	}
	return probes.Fail(probes.CauseOther, fmt.Errorf("opensearch target %s: unknown op %q", p.target, op))
}

// Close implements probes.Probe. A one-shot run (Ephemeral) first deletes the
// documents it wrote: its instance id is its own, so nothing else reads them.
func (p *Probe) Close() error {
	p.nodes.stop()
	var err error
	switch {
	case p.ownIndices():
		err = p.deleteOwnIndices()
	case p.ephemeral:
		err = p.deleteOwnDocuments()
	}
	return errors.Join(err, p.client.Close())
}

// ownIndices: a bench run writes to indices of its own
// (Config.benchIndex), and Close deletes them whole.
func (p *Probe) ownIndices() bool { return p.cfg.benchIndex && p.ephemeral }

// deleteOwnIndices deletes, whole and by exact name, the indices a bench run
// created for itself (Config.benchIndex); their aliases go with them.
func (p *Probe) deleteOwnIndices() error {
	p.mu.Lock()
	indices := slices.Sorted(maps.Keys(p.ensured))
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.RequestTimeout)
	defer cancel()
	var errs []error
	for _, index := range indices {
		errs = append(errs, p.deleteIndex(ctx, "delete this bench run's index", index))
	}
	return errors.Join(errs...)
}

// deleteOwnDocuments deletes, by id, this run's reference sets and the
// documents the write ops added (the last 64, which is all of a one-shot
// run's, and the ledger's); anything older goes with its daily index after
// retention.
func (p *Probe) deleteOwnDocuments() error {
	p.mu.Lock()
	indices := slices.Sorted(maps.Keys(p.ensured))
	p.mu.Unlock()
	var b strings.Builder
	n := 0
	del := func(index, id string) {
		b.WriteString(`{"delete":{"_index":`)
		b.Write(mustJSON(index))
		b.WriteString(`,"_id":`)
		b.Write(mustJSON(id))
		b.WriteString("}}\n")
		n++
	}
	for _, index := range indices {
		for _, id := range p.refIDs {
			del(index, id)
		}
	}
	for _, e := range p.ledgerEntries() { // the durability ledger's documents still to check
		del(e.Where, e.Key)
	}
	p.recentMu.Lock()
	for _, s := range p.recent[:min(p.nrecent, len(p.recent))] {
		del(s.index, s.doc.ID)
	}
	p.recentMu.Unlock()
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.RequestTimeout)
	defer cancel()
	var res struct {
		Items []map[string]struct {
			Status int `json:"status"`
		} `json:"items"`
	}
	what := fmt.Sprintf("delete the %d documents of this one-shot run", n)
	if _, err := p.call(ctx, request{what: what, method: http.MethodPost, path: "/_bulk", body: []byte(b.String()), ndjson: true}, nil, &res, http.StatusOK); err != nil {
		return err
	}
	failed := 0
	for _, it := range res.Items {
		for _, r := range it {
			if r.Status >= 300 && r.Status != http.StatusNotFound {
				failed++
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("opensearch target %s: %s: %d failed (they go with their daily index after retention)", p.target, what, failed)
	}
	p.logger.Debug("deleted the documents of this one-shot run", "documents", n)
	return nil
}

func (p *Probe) newDoc() Document {
	seq := p.seq.Add(1)
	r := rand.New(rand.NewPCG(rand.Uint64(), seq))
	return opDoc(p.instance, p.run, seq, p.now(), p.cfg.BodyWords, r)
}

func (p *Probe) remember(index string, d Document) {
	p.recentMu.Lock()
	p.recent[p.nrecent%len(p.recent)] = stored{index: index, doc: d}
	p.nrecent++
	p.recentMu.Unlock()
}

// putDoc indexes one document through the write alias; create-only, so an id
// that already exists (which a canary never reuses) is an error.
func (p *Probe) putDoc(ctx context.Context, index string, d Document, out *probes.Outcome) error {
	var res struct {
		Result string `json:"result"`
	}
	status, err := p.call(ctx, request{
		what:   "index document " + d.ID,
		method: http.MethodPut,
		path:   "/" + url.PathEscape(writeAlias(index)) + "/_create/" + url.PathEscape(d.ID),
		query:  url.Values{"require_alias": {"true"}},
		body:   mustJSON(d),
	}, out, &res, http.StatusCreated)
	if status == http.StatusConflict {
		// Ids are unique per instance, so a conflict means the transport retried
		// (after a connection reset) a create whose first attempt was applied:
		// the document must be there, and be what was written.
		return p.confirmStored(ctx, index, d, out)
	}
	if err != nil {
		return err
	}
	if res.Result != "created" {
		return probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: index document %s: result %q, want created", p.target, d.ID, res.Result))
	}
	return nil
}

func (p *Probe) indexOne(ctx context.Context, index string, out *probes.Outcome) error {
	d := p.newDoc()
	out.Sent = time.Now()
	if err := p.putDoc(ctx, index, d, out); err != nil {
		return err
	}
	p.remember(index, d)
	return nil
}

func (p *Probe) bulk(ctx context.Context, index string, out *probes.Outcome) error {
	n := p.cfg.BulkSize
	b, kept := p.bulkBody(index, n)
	out.Sent = time.Now()
	if err := p.bulkRequest(ctx, fmt.Sprintf("bulk of %d documents into %s", n, index), b, "", out); err != nil {
		return err
	}
	for _, d := range kept {
		p.remember(index, d)
	}
	return nil
}

// bulkBody returns the _bulk body of n new op documents, and the last of them
// (as many as the get op remembers) as Documents. The documents of one bulk
// share its date.
func (p *Probe) bulkBody(index string, n int) ([]byte, []Document) {
	alias := mustJSON(writeAlias(index))
	first := p.seq.Add(uint64(n)) - uint64(n) + 1
	now := p.now()
	keep := min(n, len(p.recent))
	if prefix := p.instance + "-" + p.run + "-"; plainJSON(prefix) {
		w := newBulkWriter(alias, p.instance, prefix, now.UTC().Format(dateLayout), p.cfg.BodyWords)
		return w.appendDocs(nil, first, n, keep)
	}
	docs := make([]Document, n)
	for i := range docs {
		seq := first + uint64(i)
		docs[i] = opDoc(p.instance, p.run, seq, now, p.cfg.BodyWords, rand.New(rand.NewPCG(rand.Uint64(), seq)))
	}
	return docsBulkBody(alias, docs), docs[n-keep:]
}

// bulkRequest sends a _bulk body and fails on any item error: the first
// one decides the cause (a missing index means the namespace is gone).
func (p *Probe) bulkRequest(ctx context.Context, what string, body []byte, refresh string, out *probes.Outcome) error {
	q := url.Values{"require_alias": {"true"}}
	if refresh != "" {
		q.Set("refresh", refresh)
	}
	var res struct {
		Errors bool `json:"errors"`
		// Items are decoded only when errors is true: counting them is all a
		// successful bulk of hundreds of items needs.
		Items []json.RawMessage `json:"items"`
	}
	if _, err := p.call(ctx, request{what: what, method: http.MethodPost, path: "/_bulk", query: q, body: body, ndjson: true}, out, &res, http.StatusOK); err != nil {
		return err
	}
	want := bytes.Count(body, []byte{'\n'}) / 2
	if len(res.Items) != want {
		return probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: %d items in the response, want %d", p.target, what, len(res.Items), want))
	}
	if !res.Errors {
		return nil
	}
	failed := 0
	var first error
	for _, rawItem := range res.Items {
		var it map[string]json.RawMessage
		if json.Unmarshal(rawItem, &it) != nil {
			continue
		}
		for _, raw := range it {
			var item struct {
				Status int             `json:"status"`
				Error  json.RawMessage `json:"error"`
			}
			// 409: a create retried by the transport after its first attempt was
			// applied (ids are unique per instance); the get op verifies content.
			if json.Unmarshal(raw, &item) != nil || item.Status < 300 || item.Status == http.StatusConflict {
				continue
			}
			failed++
			if first == nil {
				first = p.httpError(what+" (item)", item.Status, []byte(`{"error":`+string(item.Error)+`}`))
			}
		}
	}
	if first == nil {
		return probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: errors=true but no failed item", p.target, what))
	}
	if failed > 1 {
		return fmt.Errorf("%d of %d items failed, first: %w", failed, want, first)
	}
	return first
}

// searchResponse is the part of a search response dbcanary verifies.
type searchResponse struct {
	TimedOut bool `json:"timed_out"`
	Shards   struct {
		Total      int `json:"total"`
		Successful int `json:"successful"`
		Failed     int `json:"failed"`
	} `json:"_shards"`
	Hits struct {
		Total struct {
			Value    int    `json:"value"`
			Relation string `json:"relation"`
		} `json:"total"`
		Hits []struct {
			Index  string          `json:"_index"`
			ID     string          `json:"_id"`
			Source json.RawMessage `json:"_source"`
		} `json:"hits"`
	} `json:"hits"`
}

// search runs a query on the day's index and checks the response is complete.
func (p *Probe) search(ctx context.Context, what, index string, query any, size int, out *probes.Outcome) (*searchResponse, error) {
	var res searchResponse
	body := mustJSON(map[string]any{"query": query, "size": size, "track_total_hits": true})
	if _, err := p.call(ctx, request{what: what, method: http.MethodPost, path: "/" + url.PathEscape(index) + "/_search", body: body}, out, &res, http.StatusOK); err != nil {
		return nil, err
	}
	if res.TimedOut || res.Shards.Failed > 0 || res.Shards.Successful < res.Shards.Total {
		return nil, probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: partial result (timed_out=%v, %d of %d shards failed)",
			p.target, what, res.TimedOut, res.Shards.Failed, res.Shards.Total))
	}
	for _, h := range res.Hits.Hits {
		// The filters keep other instances out; a hit of theirs means the query is broken.
		if h.Index != index || !strings.HasPrefix(h.ID, p.instance+"-") {
			return nil, probes.Fail(probes.CauseMismatch, fmt.Errorf("opensearch target %s: %s: hit %s in %s is not this instance's document in %s", p.target, what, h.ID, h.Index, index))
		}
	}
	return &res, nil
}

func term(field, value string) map[string]any {
	return map[string]any{"term": map[string]any{field: value}}
}

// refFilter restricts a query to this instance's reference set.
func (p *Probe) refFilter(extra ...any) []any {
	return append([]any{term("instance", p.instance), term("kind", kindRef)}, extra...)
}

// searchAll is the default search (match_all) restricted to this instance's
// reference set: the hits must be exactly its documents, like the term and
// phrase ops, so a reference document gone or added does not hide behind the
// documents the write ops keep adding.
func (p *Probe) searchAll(ctx context.Context, index string, out *probes.Outcome) error {
	q := map[string]any{"bool": map[string]any{
		"must":   []any{map[string]any{"match_all": map[string]any{}}},
		"filter": p.refFilter(),
	}}
	out.Sent = time.Now()
	return p.expectHits(ctx, "search match_all", index, q, p.refIDs, out)
}

func (p *Probe) searchTerm(ctx context.Context, index string, out *probes.Outcome) error {
	topic := topics[p.turn.Add(1)%uint64(len(topics))]
	q := map[string]any{"bool": map[string]any{"filter": p.refFilter(term("topic", topic))}}
	out.Sent = time.Now()
	return p.expectHits(ctx, "search term topic="+topic, index, q, expectedTopic(p.refs, topic), out)
}

func (p *Probe) searchPhrase(ctx context.Context, index string, out *probes.Outcome) error {
	phrase := phrases[p.turn.Add(1)%uint64(len(phrases))]
	q := map[string]any{"bool": map[string]any{
		"must":   []any{map[string]any{"match_phrase": map[string]any{"body": phrase}}},
		"filter": p.refFilter(),
	}}
	out.Sent = time.Now()
	return p.expectHits(ctx, fmt.Sprintf("search phrase %q", phrase), index, q, expectedPhrase(p.refs, phrase), out)
}

// expectHits runs a query whose hits are known and compares the ids.
func (p *Probe) expectHits(ctx context.Context, what, index string, q any, want []string, out *probes.Outcome) error {
	res, err := p.search(ctx, what, index, q, refCount+5, out)
	if err != nil {
		return err
	}
	got := make([]string, len(res.Hits.Hits))
	for i, h := range res.Hits.Hits {
		got[i] = h.ID
	}
	sort.Strings(got)
	if d := sameIDs(want, got); d != "" || res.Hits.Total.Value != len(want) {
		// Rewrite the reference set once the difference is counted, so one
		// deleted reference document is reported once, not at every later search.
		if err := p.writeRefs(ctx, index); err != nil {
			p.logger.Warn("cannot rewrite the reference set", "index", index, "err", err)
		}
		return probes.Fail(probes.CauseMismatch, fmt.Errorf("opensearch target %s: %s in %s: %d hits, want %d: %s", p.target, what, index, res.Hits.Total.Value, len(want), d))
	}
	return nil
}

// get reads back a document this process indexed (or, before any, one of
// the reference set) by id and compares every field.
func (p *Probe) get(ctx context.Context, index string, out *probes.Outcome) error {
	n := p.turn.Add(1)
	p.recentMu.Lock()
	var s stored
	isRef := p.nrecent == 0
	if !isRef {
		s = p.recent[int(n%uint64(min(p.nrecent, len(p.recent))))]
	}
	p.recentMu.Unlock()
	if isRef {
		s = stored{index: index, doc: p.refs[n%uint64(len(p.refs))]}
	}
	var res struct {
		Found  bool            `json:"found"`
		Source json.RawMessage `json:"_source"`
	}
	out.Sent = time.Now()
	what := "get " + s.doc.ID + " from " + s.index
	status, body, err := p.do(ctx, request{what: what, method: http.MethodGet, path: "/" + url.PathEscape(s.index) + "/_doc/" + url.PathEscape(s.doc.ID)}, out)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusNotFound {
		return p.httpError(what, status, body)
	}
	if err := json.Unmarshal(body, &res); err != nil {
		if status == http.StatusNotFound {
			return p.httpError(what, status, body)
		}
		return probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: response is not JSON: %v", p.target, what, err))
	}
	if !res.Found {
		if strings.Contains(string(body), "index_not_found_exception") {
			return p.httpError(what, status, body)
		}
		if isRef {
			p.heal(ctx, s)
		}
		return probes.Fail(probes.CauseNotFound, fmt.Errorf("opensearch target %s: %s: document is gone", p.target, what))
	}
	got, err := decodeDocument(res.Source)
	if err == nil {
		if d := diff(s.doc, got); d != "" {
			err = fmt.Errorf("fields differ from what was indexed: %s", d)
		}
	}
	if err != nil {
		if isRef {
			p.heal(ctx, s)
		}
		return probes.Fail(probes.CauseMismatch, fmt.Errorf("opensearch target %s: %s: %v", p.target, what, err))
	}
	return nil
}

// confirmStored reads a document back after a create conflict and checks it
// is the one this canary wrote.
func (p *Probe) confirmStored(ctx context.Context, index string, d Document, out *probes.Outcome) error {
	what := "confirm document " + d.ID + " after a create conflict"
	var res struct {
		Found  bool            `json:"found"`
		Source json.RawMessage `json:"_source"`
	}
	if _, err := p.call(ctx, request{what: what, method: http.MethodGet, path: "/" + url.PathEscape(index) + "/_doc/" + url.PathEscape(d.ID)}, out, &res, http.StatusOK); err != nil {
		return err
	}
	got, err := decodeDocument(res.Source)
	if err == nil {
		if df := diff(d, got); df != "" {
			err = fmt.Errorf("a document with this canary's id holds other content: %s", df)
		}
	}
	if err != nil {
		return probes.Fail(probes.CauseMismatch, fmt.Errorf("opensearch target %s: %s: %v", p.target, what, err))
	}
	return nil
}

// heal rewrites a damaged reference document after its mismatch was counted,
// so one alteration is reported once rather than at every later get.
func (p *Probe) heal(ctx context.Context, s stored) {
	_, err := p.call(ctx, request{
		what: "rewrite reference document " + s.doc.ID, method: http.MethodPut,
		path:  "/" + url.PathEscape(writeAlias(s.index)) + "/_doc/" + url.PathEscape(s.doc.ID),
		query: url.Values{"require_alias": {"true"}, "refresh": {"wait_for"}}, body: mustJSON(s.doc),
	}, nil, nil, http.StatusOK, http.StatusCreated)
	if err != nil {
		p.logger.Warn("cannot rewrite a damaged reference document", "id", s.doc.ID, "err", err)
	}
}

// visibility indexes a document and searches for it until it is found: the
// op's latency is the index-to-searchable lag (plus the index request);
// phase "visible" is the lag alone.
func (p *Probe) visibility(ctx context.Context, index string, out *probes.Outcome) error {
	d := p.newDoc()
	sent := time.Now()
	out.Sent = sent
	if err := p.putDoc(ctx, index, d, out); err != nil {
		return err
	}
	indexed := time.Now()
	out.AddPhase(PhaseIndexed, indexed.Sub(sent))
	p.remember(index, d)
	deadline := sent.Add(p.cfg.VisibilityTimeout)
	q := map[string]any{"bool": map[string]any{"filter": []any{term("id", d.ID), term("instance", p.instance)}}}
	tick := time.NewTicker(p.cfg.PollInterval)
	defer tick.Stop()
	for polls := 1; ; polls++ {
		res, err := p.search(ctx, "search for "+d.ID, index, q, 1, out)
		if err != nil {
			return err
		}
		if len(res.Hits.Hits) > 0 {
			found := time.Now()
			got, err := decodeDocument(res.Hits.Hits[0].Source)
			if err == nil {
				if df := diff(d, got); df != "" {
					err = fmt.Errorf("fields differ from what was indexed: %s", df)
				}
			}
			if err != nil {
				return probes.Fail(probes.CauseMismatch, fmt.Errorf("opensearch target %s: search hit %s in %s: %v", p.target, d.ID, index, err))
			}
			out.AddPhase(PhaseVisible, found.Sub(indexed))
			return nil
		}
		if time.Now().After(deadline) {
			return probes.Fail(probes.CauseTimeout, fmt.Errorf("opensearch target %s: document %s indexed into %s was not searchable within visibility_timeout %s (%d searches; refresh_interval %s)",
				p.target, d.ID, index, p.cfg.VisibilityTimeout, polls, p.cfg.RefreshInterval))
		}
		select {
		case <-ctx.Done():
			return probes.Fail(probes.CauseTimeout, fmt.Errorf("opensearch target %s: document %s not yet searchable after %d searches: %w", p.target, d.ID, polls, ctx.Err()))
		case <-tick.C:
		}
	}
}
