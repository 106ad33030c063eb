package opensearch

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The bulkWriter relies on JSON writing every word, topic and phrase as is.
func TestVocabularyIsPlainJSON(t *testing.T) {
	for _, w := range slices.Concat(fillerWords, wordForms[1], topics, phrases) {
		if !plainJSON(w) || string(mustJSON(w)) != `"`+w+`"` {
			t.Errorf("%q is not written by JSON as is", w)
		}
	}
	for _, s := range []string{`a"b`, `a\b`, "<", ">", "&", "\n", "é", "\x7f"} {
		if plainJSON(s) {
			t.Errorf("plainJSON(%q) = true", s)
		}
	}
}

// The bulkWriter writes, byte for byte, the bulk body opDoc and appendJSON
// write for the same seeds, and remembers the same Documents (1 body word:
// the phrase before the first word).
func TestBulkWriterSameDocuments(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 8e6, time.UTC)
	alias := mustJSON(writeAlias("dbcanary-os-2025.03.04"))
	for _, c := range []struct{ n, keep, words int }{{1, 1, 200}, {7, 3, 10}, {500, 64, 200}, {40, 40, 1000}, {3, 0, 11}, {5, 5, 1}, {9, 2, 2}} {
		const instance, run = "pod-7f9c-x_1.a", "k3j9x0"
		prefix := instance + "-" + run + "-"
		w := newBulkWriter(alias, instance, prefix, now.Format(dateLayout), c.words)
		seeds := rand.New(rand.NewPCG(uint64(c.n), 9))
		var drawn []uint64
		w.seed = func() uint64 { s := seeds.Uint64(); drawn = append(drawn, s); return s }
		got, kept := w.appendDocs([]byte("x"), 41, c.n, c.keep)
		docs := make([]Document, c.n)
		for i := range docs {
			docs[i] = opDoc(instance, run, 41+uint64(i), now, c.words, rand.New(rand.NewPCG(drawn[i], 41+uint64(i))))
		}
		want := append([]byte("x"), docsBulkBody(alias, docs)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: bodies differ:\n got  %.600s\n want %.600s", c, got, want)
		}
		if len(kept) != c.keep {
			t.Fatalf("%+v: kept %d documents", c, len(kept))
		}
		for i, d := range kept {
			if d != docs[c.n-c.keep+i] {
				t.Fatalf("%+v: kept[%d] = %+v\nwant %+v", c, i, d, docs[c.n-c.keep+i])
			}
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(got[1:]), "\n"), "\n") {
			if !json.Valid([]byte(line)) {
				t.Fatalf("%+v: not JSON: %.200s", c, line)
			}
		}
	}
}

// An instance id JSON escapes takes the document-by-document path, and its
// bulk body still holds the documents it remembers.
func TestBulkBodyEscapedInstance(t *testing.T) {
	for _, inst := range []string{"plain-1", `we"ird<&>é`} {
		p := &Probe{instance: inst, run: "r1", now: time.Now, cfg: Config{BodyWords: 30}}
		b, kept := p.bulkBody("dbcanary-x-2025.01.02", 100)
		if n := bytes.Count(b, []byte{'\n'}); n != 200 || len(kept) != len(p.recent) {
			t.Fatalf("%s: %d lines, %d kept", inst, n, len(kept))
		}
		lines := bytes.Split(b, []byte{'\n'})
		for i, d := range kept {
			got, err := decodeDocument(lines[2*(100-len(kept)+i)+1])
			if err != nil || diff(d, got) != "" {
				t.Fatalf("%s: kept[%d] is not the document in the body: %v %s", inst, i, err, diff(d, got))
			}
		}
	}
}
