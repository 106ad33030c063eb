package opensearch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// The durability ledger's documents are ordinary op documents (the strict
// mapping's fields, kind "op") indexed into the day's canary index through
// its write alias, with ids ledger-<instance>-<run>-<seq>; they go with
// their daily index after retention. Each is read back with GET by id from
// the index it was written to; its checksum is the SHA-256 of the document
// as indexed (canonical JSON of the canary's Document).

// ledgerLimit is the longest ledger age a document is kept: a daily index is
// deleted retention after its day ended, so a document written at the end of
// a day lives at least retention.
func (c *Config) ledgerLimit() (time.Duration, string) {
	return c.Retention, fmt.Sprintf("a daily canary index is deleted retention (%s) after its day ended, so a document written at the end of a day lives only that long", probes.AgeLabel(c.Retention))
}

// ledgerForgetAfter is the age past which an entry is forgotten unchecked
// (dbcanary was down past its check): its index may be gone by retention.
func (c *Config) ledgerForgetAfter() time.Duration { return c.Retention }

// Ledger returns the probe's durability ledger.
func (p *Probe) Ledger() *probes.Ledger { return p.ledger }

// ledgerWrite indexes one document and, once the index API acknowledged it
// (201 created), records its id and checksum.
func (p *Probe) ledgerWrite(ctx context.Context, index string, out *probes.Outcome) error {
	d := p.newDoc()
	d.ID = "ledger-" + d.ID
	out.Sent = time.Now()
	if err := p.putDoc(ctx, index, d, out); err != nil {
		return err
	}
	if err := p.ledger.Add(probes.LedgerEntry{Key: d.ID, Where: index, Sum: probes.LedgerSum(mustJSON(d)), Acked: time.Now(), Setting: "index API _create"}); err != nil {
		p.logger.Warn("durability ledger: cannot save the file; the write is still checked while this process runs", "err", err)
	}
	return nil
}

// ledgerCheck reads back, with GET by id, the documents that reached a check age.
func (p *Probe) ledgerCheck(ctx context.Context, out *probes.Outcome) error {
	out.Sent = time.Now()
	after := p.cfg.ledgerForgetAfter()
	if n, err := p.ledger.Forget(time.Now().Add(-after)); n > 0 {
		p.logger.Info("durability ledger: forgot entries older than retention (dbcanary was down past their check)", "entries", n, "older_than", after, "err", err)
	}
	read := func(ctx context.Context, d probes.LedgerDue) (probes.LedgerResult, error) {
		what := "get " + d.Key + " from " + d.Where + " (ledger)"
		status, body, err := p.do(ctx, request{what: what, method: http.MethodGet, path: "/" + url.PathEscape(d.Where) + "/_doc/" + url.PathEscape(d.Key)}, out)
		if err != nil {
			return "", err
		}
		if status != http.StatusOK && status != http.StatusNotFound {
			return "", p.httpError(what, status, body)
		}
		var res struct {
			Found  bool            `json:"found"`
			Source json.RawMessage `json:"_source"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			if status == http.StatusNotFound {
				return "", p.httpError(what, status, body)
			}
			return "", probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: response is not JSON: %v", p.target, what, err))
		}
		if !res.Found {
			// The index itself gone (deleted behind the canary's back, or
			// lost with the node's data) loses the document too.
			if strings.Contains(string(body), "index_not_found_exception") {
				p.logger.Warn("durability ledger: the index of an acknowledged document is gone", "index", d.Where, "id", d.Key)
			}
			return probes.LedgerMissing, nil
		}
		got, err := decodeDocument(res.Source)
		if err != nil || probes.LedgerSum(mustJSON(got)) != d.Sum {
			return probes.LedgerCorrupted, nil
		}
		return probes.LedgerIntact, nil
	}
	return p.ledger.Check(ctx, read, nil) // documents go with their daily index
}

// LedgerSettings implements probes.LedgerConfigured: the ages and bound the target's ledger is opened with.
func (c *Config) LedgerSettings() ([]time.Duration, int) {
	return c.Ledger.EffectiveAges(), c.Ledger.MaxEntries
}

// ledgerEntries are the ledger's entries; none when no ledger was handed
// over (a probe built without the engine, in tests).
func (p *Probe) ledgerEntries() []probes.LedgerEntry {
	if p.ledger == nil {
		return nil
	}
	return p.ledger.Entries()
}
