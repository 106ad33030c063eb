package opensearch

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// Canary indices are named <prefix><yyyy.mm.dd> (UTC day). They are shared by
// every instance probing the target with the same prefix: documents carry the
// instance id and every query filters on it, so a daily index per prefix keeps
// the index count bounded by retention however many instances run.
const dayLayout = "2006.01.02"

func (p *Probe) indexName(t time.Time) string { return p.prefix + t.UTC().Format(dayLayout) }

// writeAlias is the alias writes go through with require_alias=true, so a
// write into a deleted index fails (404) instead of auto-creating an index
// with a guessed mapping.
func writeAlias(index string) string { return index + "-write" }

// benchInfix follows the prefix in the indices of a bench run
// (<prefix>bench-<run>-<day>, Config.benchIndex).
const benchInfix = "bench-"

// indexDay parses the day of a canary index name, or of a bench run's index
// under the same prefix (so retention sweeps what a crashed run left); ok is
// false for any other name.
func (p *Probe) indexDay(name string) (time.Time, bool) {
	rest, found := strings.CutPrefix(name, p.prefix)
	if !found {
		return time.Time{}, false
	}
	if r, ok := strings.CutPrefix(rest, benchInfix); ok {
		run, day, ok := strings.Cut(r, "-")
		if !ok || !isRun(run) {
			return time.Time{}, false
		}
		rest = day
	}
	if len(rest) != len(dayLayout) {
		return time.Time{}, false
	}
	d, err := time.Parse(dayLayout, rest)
	if err != nil {
		return time.Time{}, false
	}
	return d, true
}

// expired reports whether a canary index of day d is past retention: its day
// ended more than retention ago.
func (p *Probe) expired(d, now time.Time) bool {
	return d.Add(24 * time.Hour).Add(p.cfg.Retention).Before(now)
}

// indexBody is the explicit mapping: strict, so a document with other fields
// is refused rather than silently widening the mapping.
func (p *Probe) indexBody(index string) []byte {
	text := map[string]any{"type": "text"}
	keyword := map[string]any{"type": "keyword"}
	return mustJSON(map[string]any{
		"settings": map[string]any{
			"number_of_shards":   1,
			"number_of_replicas": p.cfg.Replicas,
			"refresh_interval":   strconv.FormatInt(p.cfg.RefreshInterval.Milliseconds(), 10) + "ms",
		},
		"mappings": map[string]any{
			"dynamic": "strict",
			"properties": map[string]any{
				"id": keyword, "instance": keyword, "kind": keyword, "topic": keyword,
				"seq":      map[string]any{"type": "long"},
				"date":     map[string]any{"type": "date", "format": "strict_date_optional_time"},
				"title":    text,
				"abstract": text,
				"body":     text,
			},
		},
		"aliases": map[string]any{writeAlias(index): map[string]any{}},
	})
}

// ensureIndex creates the day's index (or checks it exists), makes sure the
// write alias points at it and (re)writes this instance's reference set.
// The caller holds p.mu.
func (p *Probe) ensureIndex(ctx context.Context, index string) error {
	status, body, err := p.do(ctx, request{what: "create index " + index, method: http.MethodPut, path: "/" + url.PathEscape(index), body: p.indexBody(index)}, nil)
	if err != nil {
		return err
	}
	switch {
	case status == http.StatusOK:
		if p.ensured[index] {
			p.recreated.Add(1)
			p.logger.Warn("canary index was deleted behind dbcanary's back; recreated it", "index", index, "recreated_total", p.recreated.Load())
		} else {
			p.logger.Info("created canary index", "index", index, "replicas", p.cfg.Replicas, "refresh_interval", p.cfg.RefreshInterval)
		}
	case status == http.StatusBadRequest && strings.Contains(string(body), "resource_already_exists_exception"):
		// Another instance (or an earlier run) created it: make sure the alias is there.
		if _, err := p.call(ctx, request{what: "add write alias to " + index, method: http.MethodPut,
			path: "/" + url.PathEscape(index) + "/_alias/" + url.PathEscape(writeAlias(index))}, nil, nil, http.StatusOK); err != nil {
			return err
		}
	default:
		return p.httpError("create index "+index, status, body)
	}
	if err := p.checkMapping(ctx, index); err != nil {
		return err
	}
	if err := p.writeRefs(ctx, index); err != nil {
		return err
	}
	p.ensured[index] = true
	p.index = index
	return nil
}

// fieldTypes is the type each field the canary writes and queries must have:
// a term query on a text field, or a date stored as a long, would make the
// canary's own checks fail and look like data loss.
var fieldTypes = map[string]string{
	"id": "keyword", "instance": "keyword", "kind": "keyword", "topic": "keyword",
	"seq": "long", "date": "date", "title": "text", "abstract": "text", "body": "text",
}

// checkMapping reads the index's mapping back: an index template matching
// the prefix can disable _source (gets would return no document) and an
// index created by something else (auto-created by a stray write, or by an
// older tool) can map the canary's fields otherwise. Either is a setup
// problem to fix, never data loss.
func (p *Probe) checkMapping(ctx context.Context, index string) error {
	type field struct {
		Type string `json:"type"`
	}
	var res map[string]struct {
		Mappings struct {
			Source *struct {
				Enabled *bool `json:"enabled"`
			} `json:"_source"`
			Properties map[string]field `json:"properties"`
		} `json:"mappings"`
	}
	what := "read the mapping of " + index
	status, err := p.call(ctx, request{what: what, method: http.MethodGet, path: "/" + url.PathEscape(index) + "/_mapping"}, nil, &res, http.StatusOK)
	if status == http.StatusForbidden {
		// The check is a safety net: a user without the permission still gets a working canary.
		p.logger.Warn("cannot check the canary index's mapping: grant indices:admin/mappings/get on the prefix", "index", index, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: %d indices in the answer, want 1", p.target, what, len(res)))
	}
	var problems []string
	for _, m := range res {
		if m.Mappings.Source != nil && m.Mappings.Source.Enabled != nil && !*m.Mappings.Source.Enabled {
			problems = append(problems, "_source is disabled (documents cannot be read back)")
		}
		for _, name := range slices.Sorted(maps.Keys(fieldTypes)) {
			got, ok := m.Mappings.Properties[name]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("field %s is not mapped (want %s)", name, fieldTypes[name]))
			case got.Type != fieldTypes[name]:
				problems = append(problems, fmt.Sprintf("field %s is %s, want %s", name, cmp.Or(got.Type, "an object"), fieldTypes[name]))
			}
		}
	}
	if len(problems) > 0 {
		return probes.Fail(probes.CauseSetup, fmt.Errorf("opensearch target %s: canary index %s cannot hold the canary's documents: %s. "+
			"An index template matching %s* or an index created by something else? Fix the template, then delete the index (it holds only canary documents): dbcanary recreates it (see docs/opensearch.md)",
			p.target, index, strings.Join(problems, "; "), p.prefix))
	}
	return nil
}

// writeRefs (re)indexes the reference set and waits until it is searchable,
// so the term and phrase ops can expect exact hits from the first run.
func (p *Probe) writeRefs(ctx context.Context, index string) error {
	var b strings.Builder
	for _, d := range p.refs {
		b.WriteString(`{"index":{"_index":`)
		b.Write(mustJSON(writeAlias(index)))
		b.WriteString(`,"_id":`)
		b.Write(mustJSON(d.ID))
		b.WriteString("}}\n")
		b.Write(mustJSON(d))
		b.WriteByte('\n')
	}
	// refresh=true, not wait_for: with a long refresh_interval wait_for would outlast the request timeout.
	return p.bulkRequest(ctx, "write reference set into "+index, []byte(b.String()), "true", nil)
}

// sweep deletes this prefix's indices past retention. It lists only names
// under the prefix and deletes by exact name, never by pattern.
func (p *Probe) sweep(ctx context.Context, now time.Time) error {
	var rows []struct {
		Index string `json:"index"`
	}
	q := url.Values{"format": {"json"}, "h": {"index"}, "expand_wildcards": {"open,closed"}}
	if _, err := p.call(ctx, request{what: "list canary indices", method: http.MethodGet,
		path: "/_cat/indices/" + url.PathEscape(p.prefix+"*"), query: q}, nil, &rows, http.StatusOK); err != nil {
		return err
	}
	for _, r := range rows {
		d, ok := p.indexDay(r.Index)
		if !ok || !p.expired(d, now) {
			continue
		}
		// 404: another instance was first.
		if err := p.deleteIndex(ctx, "delete expired index", r.Index); err != nil {
			return err
		}
		p.logger.Info("deleted canary index past retention", "index", r.Index, "retention", p.cfg.Retention)
	}
	return nil
}

// deleteIndex deletes one index by its exact name (never a pattern); an
// index already gone (404) is not an error. what names the action in errors.
func (p *Probe) deleteIndex(ctx context.Context, what, index string) error {
	what += " " + index
	status, body, err := p.do(ctx, request{what: what, method: http.MethodDelete, path: "/" + url.PathEscape(index)}, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusNotFound {
		return p.httpError(what, status, body)
	}
	return nil
}

// current returns today's index, creating it at the first op of a new day.
func (p *Probe) current(ctx context.Context) (string, error) {
	now := p.now()
	want := p.indexName(now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.index == want {
		return want, nil
	}
	if err := p.ensureIndex(ctx, want); err != nil {
		return "", err
	}
	if err := p.sweep(ctx, now); err != nil {
		p.logger.Warn("cannot delete canary indices past retention", "err", err)
	}
	return want, nil
}

// isRun reports whether s is a run id (Probe.run: base 36, at most 8 digits).
func isRun(s string) bool {
	if s == "" || len(s) > 8 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
