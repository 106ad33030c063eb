package opensearch

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestRefDocsAreDeterministic(t *testing.T) {
	a, b := refDocs("inst-1"), refDocs("inst-1")
	for k := range a {
		if d := diff(a[k], b[k]); d != "" {
			t.Fatalf("ref doc %d differs between two generations: %s", k, d)
		}
		if !strings.HasPrefix(a[k].ID, "inst-1-") || a[k].Instance != "inst-1" || a[k].Kind != kindRef {
			t.Fatalf("ref doc %d does not carry the instance: %+v", k, a[k])
		}
	}
	if other := refDocs("inst-2"); other[0].Body == a[0].Body {
		t.Fatal("two instances share reference bodies")
	}
}

// The phrase words must occur only where planted, or match_phrase hits are not predictable.
func TestPhraseWordsAreNotInVocabulary(t *testing.T) {
	vocab := map[string]bool{}
	for _, w := range fillerWords {
		vocab[w] = true
	}
	seen := map[string]bool{}
	for _, p := range phrases {
		for _, w := range strings.Fields(p) {
			if vocab[w] || seen[w] {
				t.Fatalf("phrase word %q is not unique", w)
			}
			seen[w] = true
		}
	}
}

func TestExpectedHits(t *testing.T) {
	refs := refDocs("inst-1")
	total := 0
	for _, tp := range topics {
		ids := expectedTopic(refs, tp)
		if len(ids) == 0 {
			t.Fatalf("topic %s has no reference document", tp)
		}
		total += len(ids)
	}
	if total != refCount {
		t.Fatalf("topics cover %d reference documents, want %d", total, refCount)
	}
	total = 0
	for _, ph := range phrases {
		ids := expectedPhrase(refs, ph)
		if len(ids) == 0 {
			t.Fatalf("phrase %q is in no reference document", ph)
		}
		total += len(ids)
	}
	if total != refCount {
		t.Fatalf("each reference document must hold exactly one phrase: %d hits for %d documents", total, refCount)
	}
}

func TestOpDocShape(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	d := opDoc("inst-1", "run", 7, now, 200, rand.New(rand.NewPCG(1, 2)))
	if d.ID != "inst-1-run-7" || d.Date != "2025-03-04T05:06:07.008Z" || d.Kind != kindOp {
		t.Fatalf("unexpected document header: %+v", d)
	}
	if n := len(strings.Fields(d.Body)); n != 202 {
		t.Fatalf("body has %d words, want 200 + a 2-word phrase", n)
	}
	if d.Title == "" || d.Abstract == "" {
		t.Fatal("empty title or abstract")
	}
}

func TestDecodeAndDiff(t *testing.T) {
	d := refDoc("inst-1", 3)
	got, err := decodeDocument(mustJSON(d))
	if err != nil {
		t.Fatal(err)
	}
	if df := diff(d, got); df != "" {
		t.Fatalf("round trip differs: %s", df)
	}
	got.Title += "!"
	got.Seq++
	if df := diff(d, got); df != "seq, title" {
		t.Fatalf("diff = %q, want \"seq, title\"", df)
	}
	if _, err := decodeDocument([]byte(`{"id":"x","extra":1}`)); err == nil {
		t.Fatal("a field dbcanary did not write must be a difference")
	}
}

func TestSameIDs(t *testing.T) {
	if d := sameIDs([]string{"a", "b"}, []string{"a", "b"}); d != "" {
		t.Fatalf("equal sets: %q", d)
	}
	if d := sameIDs([]string{"a", "b"}, []string{"a", "c"}); d != "missing b; unexpected c" {
		t.Fatalf("got %q", d)
	}
}
