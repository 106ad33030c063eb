package opensearch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Document is a canary document, shaped like the pmc corpus of OpenSearch
// Benchmark (an id keyword, a date, a title, an abstract and a long body) plus
// the keywords that keep instances apart and make queries predictable.
type Document struct {
	ID       string `json:"id"`
	Instance string `json:"instance"`
	// Kind is "ref" for the reference set (fixed content, searched by the
	// term and phrase ops) and "op" for documents the write ops add.
	Kind     string `json:"kind"`
	Topic    string `json:"topic"`
	Seq      uint64 `json:"seq"`
	Date     string `json:"date"`
	Title    string `json:"title"`
	Abstract string `json:"abstract"`
	Body     string `json:"body"`
}

const (
	kindRef = "ref"
	kindOp  = "op"
	// refCount is the size of the reference set each instance keeps in each day's index.
	refCount = 12
	// dateLayout is what the date field holds; OpenSearch returns _source as
	// sent, so the string round-trips exactly.
	dateLayout = "2006-01-02T15:04:05.000Z"
)

// fillerWords is the fixed vocabulary bodies are drawn from (no data set is downloaded).
var fillerWords = strings.Fields(`
	patient patients cell cells protein proteins gene genes expression clinical study
	studies analysis results method methods data disease treatment therapy tissue
	response level levels effect effects model models sample samples group groups
	control increase decrease significant observed associated function role risk
	factor factors receptor pathway signaling activity human mouse mice tumor cancer
	infection immune blood brain heart liver kidney lung dose drug trial cohort
	population measure measured rate rates time follow outcome outcomes primary
	secondary baseline interval confidence ratio odds hazard regression variable
	variables sequence sequencing genome mutation variant variants allele molecular
	structure binding domain membrane enzyme inhibitor inhibition mechanism acute
	chronic severe mild early late high low novel potential previous recent current
	compared between within during after before among across using based including
	evidence report reported review literature system network image imaging scan
	score scale assessment quality health care hospital surgery surgical procedure
	diagnosis diagnostic marker markers serum plasma concentration antibody antigen
	virus viral bacterial strain culture growth development differentiation stem
	neuron neuronal synaptic cortex memory behavior stress metabolic insulin glucose
	obesity diabetes inflammation inflammatory oxidative mitochondrial apoptosis
`)

// topics are the values of the keyword field the term op queries.
var topics = []string{"oncology", "cardiology", "neurology", "immunology", "genomics", "virology", "epidemiology", "pharmacology"}

// phrases are planted into bodies for the phrase op. Their words occur nowhere
// else, so a phrase matches exactly the documents it was planted in.
var phrases = []string{
	"zephyrine quokkanol", "vellichor marzipanase", "obsidiane wumpusoid",
	"glimmerase tundraxin", "quillomab hexaferin",
}

// refDoc returns reference document k of an instance: the same content on
// every run, so term and phrase hits are known in advance.
func refDoc(instance string, k int) Document {
	h := fnv.New64a()
	h.Write([]byte(instance))
	r := rand.New(rand.NewPCG(h.Sum64(), uint64(k)))
	d := Document{
		ID:       instance + "-ref-" + strconv.Itoa(k),
		Instance: instance,
		Kind:     kindRef,
		Topic:    topics[k%len(topics)],
		Seq:      uint64(k),
		Date:     time.Date(2020, 1, 1+k, 0, 0, 0, 0, time.UTC).Format(dateLayout),
	}
	fill(&d, r, 60, phrases[k%len(phrases)])
	return d
}

// refDocs returns the reference set of an instance.
func refDocs(instance string) []Document {
	docs := make([]Document, refCount)
	for k := range docs {
		docs[k] = refDoc(instance, k)
	}
	return docs
}

// expectedTopic returns the ids of the reference documents with topic t, sorted.
func expectedTopic(refs []Document, t string) []string {
	var ids []string
	for _, d := range refs {
		if d.Topic == t {
			ids = append(ids, d.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// expectedPhrase returns the ids of the reference documents whose body holds phrase p, sorted.
func expectedPhrase(refs []Document, p string) []string {
	var ids []string
	for _, d := range refs {
		if strings.Contains(d.Body, p) {
			ids = append(ids, d.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// opDoc returns a new document for the write ops.
func opDoc(instance, run string, seq uint64, now time.Time, bodyWords int, r *rand.Rand) Document {
	d := Document{
		ID:       instance + "-" + run + "-" + strconv.FormatUint(seq, 10),
		Instance: instance,
		Kind:     kindOp,
		Topic:    topics[r.IntN(len(topics))],
		Seq:      seq,
		Date:     now.UTC().Format(dateLayout),
	}
	fill(&d, r, bodyWords, phrases[r.IntN(len(phrases))])
	return d
}

// fill writes title, abstract and body from the vocabulary and plants phrase
// in the body, before its word number at (drawn before the body's words).
// It makes its draws in a fixed order, so a reference document of a given seed
// is the same in every version; the body is written in one pass (a bulk of
// 500 documents spends its client time here).
func fill(d *Document, r *rand.Rand, bodyWords int, phrase string) {
	d.Title = capitalize(words(r, 6+r.IntN(5)))
	d.Abstract = sentences(r, 30+r.IntN(20))
	at := r.IntN(bodyWords)
	var b strings.Builder
	b.Grow(bodyWords*9 + len(phrase) + 1)
	writeSentences(&b, r, bodyWords, at, phrase)
	d.Body = b.String()
}

func words(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fillerWords[r.IntN(len(fillerWords))])
	}
	return b.String()
}

// sentences returns n words cut into sentences of 8 to 20 words.
func sentences(r *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n * 9)
	writeSentences(&b, r, n, -1, "")
	return b.String()
}

// writeSentences writes n words cut into sentences of 8 to 20 words, each
// capitalized and ended by a period, with phrase (if any) inserted before
// word number at: "... w(at-1) PHRASE w(at) ...".
func writeSentences(b *strings.Builder, r *rand.Rand, n, at int, phrase string) {
	i := 0
	for n > 0 {
		k := min(n, 8+r.IntN(13))
		for j := range k {
			if i > 0 {
				b.WriteByte(' ')
			}
			if i == at {
				b.WriteString(phrase)
				b.WriteByte(' ')
			}
			w := fillerWords[r.IntN(len(fillerWords))]
			if j == 0 {
				b.WriteString(strings.ToUpper(w[:1]))
				w = w[1:]
			}
			b.WriteString(w)
			i++
		}
		b.WriteByte('.')
		n -= k
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// decodeDocument parses a _source strictly: a field dbcanary did not write is a difference too.
func decodeDocument(src json.RawMessage) (Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("_source is not a canary document: %v", err)
	}
	return d, nil
}

// diff names the fields that differ between what was indexed and what was read.
func diff(want, got Document) string {
	var fields []string
	check := func(name string, equal bool) {
		if !equal {
			fields = append(fields, name)
		}
	}
	check("id", want.ID == got.ID)
	check("instance", want.Instance == got.Instance)
	check("kind", want.Kind == got.Kind)
	check("topic", want.Topic == got.Topic)
	check("seq", want.Seq == got.Seq)
	check("date", want.Date == got.Date)
	check("title", want.Title == got.Title)
	check("abstract", want.Abstract == got.Abstract)
	check("body", want.Body == got.Body)
	return strings.Join(fields, ", ")
}

// sameIDs compares two sorted id lists and describes the difference.
func sameIDs(want, got []string) string {
	w := map[string]bool{}
	for _, id := range want {
		w[id] = true
	}
	var extra, missing []string
	g := map[string]bool{}
	for _, id := range got {
		if g[id] {
			extra = append(extra, id+" (twice)")
		}
		g[id] = true
		if !w[id] {
			extra = append(extra, id)
		}
	}
	for _, id := range want {
		if !g[id] {
			missing = append(missing, id)
		}
	}
	switch {
	case len(extra) == 0 && len(missing) == 0:
		return ""
	case len(extra) == 0:
		return "missing " + strings.Join(missing, " ")
	case len(missing) == 0:
		return "unexpected " + strings.Join(extra, " ")
	}
	return "missing " + strings.Join(missing, " ") + "; unexpected " + strings.Join(extra, " ")
}

// appendJSON appends d as encoding/json marshals it, byte for byte (field
// order, escaping), without reflection: a bulk writes hundreds of documents
// per request, and this is most of the client's work after generating them.
func (d *Document) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.ID)
	b = append(b, `,"instance":`...)
	b = appendJSONString(b, d.Instance)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, d.Kind)
	b = append(b, `,"topic":`...)
	b = appendJSONString(b, d.Topic)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, d.Seq, 10)
	b = append(b, `,"date":`...)
	b = appendJSONString(b, d.Date)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, d.Title)
	b = append(b, `,"abstract":`...)
	b = appendJSONString(b, d.Abstract)
	b = append(b, `,"body":`...)
	b = appendJSONString(b, d.Body)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string the way encoding/json does:
// printable ASCII other than " \ < > & is copied; any other string is left
// to encoding/json (control characters, HTML escaping, U+2028/9, invalid
// UTF-8), so the bytes are always the same as json.Marshal's.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// payloadSizes are the JSON sizes of an op document with bodyWords words and
// of a reference document (the mean over the set): the payload estimates
// check-config prints a target's load from.
//
// Ops calls it before a config is known to be valid (config.Parse reports the
// op-name problems with the field problems), so an out-of-range body_words is
// clamped to the range Validate accepts: never a panic on 0, never gigabytes
// on a huge value.
func payloadSizes(bodyWords int) (doc, ref float64) {
	bodyWords = min(max(bodyWords, minBodyWords), maxBodyWords)
	const instance = "dbcanary-0123456789ab" // an instance id of the usual length
	b, _ := json.Marshal(opDoc(instance, "0123456789ab", 1, time.Unix(0, 0), bodyWords, rand.New(rand.NewPCG(1, 2))))
	var total int
	for _, d := range refDocs(instance) {
		r, _ := json.Marshal(d)
		total += len(r)
	}
	return float64(len(b)), float64(total) / refCount
}
