package opensearch

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
)

// wordForms are fillerWords as the bulkWriter appends them: [0] as is, [1]
// with the first letter upper-cased (a sentence's or title's first word),
// each with a space before it in [2] and [3]: one append a word, no
// allocation per sentence.
var wordForms = func() (f [4][]string) {
	for _, w := range fillerWords {
		c := capitalize(w)
		f[0], f[1], f[2], f[3] = append(f[0], w), append(f[1], c), append(f[2], " "+w), append(f[3], " "+c)
	}
	return f
}()

// bulkWriter writes the bulk body of op documents straight from the random
// draws into one buffer. The documents are the same, byte for byte, as opDoc
// followed by appendJSON with the same seeds (TestBulkWriterSameDocuments):
// the same draws in the same order, without the intermediate strings, the
// escape scan of vocabulary words that need none, or a generator allocated
// per document. A bulk of 500 spent most of its client time building those.
//
// Only for an id prefix that JSON writes as is (plainJSON); any other
// instance id goes through docsBulkBody.
type bulkWriter struct {
	pcg       rand.PCG
	seed      func() uint64 // the first half of each document's seed (rand.Uint64)
	action    []byte        // `{"create":{"_index":"ALIAS","_id":"PREFIX`
	prefix    string        // instance-run-: the id before its seq
	instance  string
	date      string
	bodyWords int
}

func newBulkWriter(aliasJSON []byte, instance, prefix, date string, bodyWords int) *bulkWriter {
	a := append([]byte(`{"create":{"_index":`), aliasJSON...)
	a = append(a, `,"_id":"`...)
	a = append(a, prefix...)
	return &bulkWriter{seed: rand.Uint64, action: a, prefix: prefix, instance: instance, date: date, bodyWords: bodyWords}
}

// plainJSON reports whether encoding/json writes s as "s": printable ASCII
// other than " \ < > &.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// intN is rand.Rand.IntN on the writer's PCG, the same computation (and so
// the same sequence) without the Source interface in between.
func (w *bulkWriter) intN(n int) int {
	u := uint64(n)
	if u&(u-1) == 0 {
		return int(w.pcg.Uint64() & (u - 1))
	}
	hi, lo := bits.Mul64(w.pcg.Uint64(), u)
	if lo < u {
		thresh := -u % u
		for lo < thresh {
			hi, lo = bits.Mul64(w.pcg.Uint64(), u)
		}
	}
	return int(hi)
}

// appendDocs appends n documents, seqs first to first+n-1, as _bulk create
// lines, and returns the last keep of them as Documents (for the get op).
func (w *bulkWriter) appendDocs(b []byte, first uint64, n, keep int) ([]byte, []Document) {
	kept := make([]Document, 0, keep)
	for i := range n {
		start := len(b)
		seq := first + uint64(i)
		var s docSpans
		b, s = w.appendDoc(b, seq)
		if i >= n-keep {
			kept = append(kept, w.document(b, seq, s))
		}
		if i == 0 {
			// One allocation for the whole body: every document is near the first one's size.
			b = slices.Grow(b, (n-1)*(len(b)-start)*9/8)
		}
	}
	return b, kept
}

// docSpans are where a written document's generated fields are in the body.
type docSpans struct {
	topic                                       int
	title, titleEnd, abs, absEnd, body, bodyEnd int
}

// appendDoc appends the action line and the document of seq: opDoc's draws
// (topic, phrase, then fill's) in opDoc's order.
func (w *bulkWriter) appendDoc(b []byte, seq uint64) ([]byte, docSpans) {
	w.pcg.Seed(w.seed(), seq)
	var s docSpans
	s.topic = w.intN(len(topics))
	phrase := phrases[w.intN(len(phrases))]
	b = append(b, w.action...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, "\"}}\n{\"id\":\""...)
	b = append(b, w.prefix...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `","instance":"`...)
	b = append(b, w.instance...)
	b = append(b, `","kind":"`+kindOp+`","topic":"`...)
	b = append(b, topics[s.topic]...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"date":"`...)
	b = append(b, w.date...)
	b = append(b, `","title":"`...)
	s.title = len(b)
	for i := range 6 + w.intN(5) {
		b = append(b, wordForms[min(i, 1)*2+boolInt(i == 0)][w.intN(len(fillerWords))]...)
	}
	s.titleEnd = len(b)
	b = append(b, `","abstract":"`...)
	s.abs = len(b)
	b = w.appendSentences(b, 30+w.intN(20), -1, "")
	s.absEnd = len(b)
	at := w.intN(w.bodyWords)
	b = append(b, `","body":"`...)
	s.body = len(b)
	b = w.appendSentences(b, w.bodyWords, at, phrase)
	s.bodyEnd = len(b)
	return append(b, "\"}\n"...), s
}

// appendSentences is writeSentences into b: n words in sentences of 8 to 20
// words, phrase (if any) before word number at.
func (w *bulkWriter) appendSentences(b []byte, n, at int, phrase string) []byte {
	i := 0
	for n > 0 {
		k := min(n, 8+w.intN(13))
		for j := range k {
			spaced := i > 0
			if i == at {
				if spaced {
					b = append(b, ' ')
				}
				b = append(b, phrase...)
				spaced = true
			}
			b = append(b, wordForms[boolInt(spaced)*2+boolInt(j == 0)][w.intN(len(fillerWords))]...)
			i++
		}
		b = append(b, '.')
		n -= k
	}
	return b
}

// document is the Document the writer wrote for seq, read back from b.
func (w *bulkWriter) document(b []byte, seq uint64, s docSpans) Document {
	return Document{
		ID:       w.prefix + strconv.FormatUint(seq, 10),
		Instance: w.instance,
		Kind:     kindOp,
		Topic:    topics[s.topic],
		Seq:      seq,
		Date:     w.date,
		Title:    string(b[s.title:s.titleEnd]),
		Abstract: string(b[s.abs:s.absEnd]),
		Body:     string(b[s.body:s.bodyEnd]),
	}
}

// docsBulkBody is the bulk body built document by document (opDoc, then
// appendJSON): for an instance id JSON has to escape, and the reference the
// bulkWriter is tested and benchmarked against.
func docsBulkBody(aliasJSON []byte, docs []Document) []byte {
	var b []byte
	for i := range docs {
		b = append(b, `{"create":{"_index":`...)
		b = append(b, aliasJSON...)
		b = append(b, `,"_id":`...)
		b = appendJSONString(b, docs[i].ID)
		b = append(b, "}}\n"...)
		start := len(b)
		b = docs[i].appendJSON(b)
		b = append(b, '\n')
		if i == 0 {
			b = slices.Grow(b, (len(docs)-1)*(len(b)-start+len(aliasJSON)+len(docs[i].ID)+64))
		}
	}
	return b
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
