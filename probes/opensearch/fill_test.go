package opensearch

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// oldFill is fill as it was before it wrote the body in one pass: the
// reference of what documents of a given seed look like.
func oldFill(d *Document, r *rand.Rand, bodyWords int, phrase string) {
	d.Title = capitalize(words(r, 6+r.IntN(5)))
	d.Abstract = oldSentences(r, 30+r.IntN(20))
	at := r.IntN(bodyWords)
	body := oldSentences(r, bodyWords)
	w := strings.Fields(body)
	w = append(w[:at], append(strings.Fields(phrase), w[at:]...)...)
	d.Body = strings.Join(w, " ")
}

func oldSentences(r *rand.Rand, n int) string {
	var b strings.Builder
	for n > 0 {
		k := min(n, 8+r.IntN(13))
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(capitalize(words(r, k)))
		b.WriteByte('.')
		n -= k
	}
	return b.String()
}

// A document of a given seed is the same as before the one-pass body: the
// reference set an older version wrote still matches what this one expects.
func TestFillSameDocumentsAsBefore(t *testing.T) {
	for seed := range uint64(2000) {
		for _, n := range []int{1, 2, 8, 9, 60, 200} {
			phrase := phrases[int(seed)%len(phrases)]
			var got, want Document
			fill(&got, rand.New(rand.NewPCG(seed, 7)), n, phrase)
			oldFill(&want, rand.New(rand.NewPCG(seed, 7)), n, phrase)
			if got != want {
				t.Fatalf("seed %d, %d words:\n got  %+v\n want %+v", seed, n, got, want)
			}
		}
	}
}

func BenchmarkOpDoc(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	b.ReportAllocs()
	for range b.N {
		_ = mustJSON(opDoc("inst", "run", 1, now, 200, r))
	}
}

// BenchmarkFill compares the one-pass body with the one it replaced.
func BenchmarkFill(b *testing.B) {
	for _, c := range []struct {
		name string
		fill func(*Document, *rand.Rand, int, string)
	}{{"one-pass", fill}, {"before", oldFill}} {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for range b.N {
				var d Document
				c.fill(&d, r, 200, phrases[0])
			}
		})
	}
}

// appendJSON writes what encoding/json writes, byte for byte, for generated
// documents and for strings that need escaping.
func TestAppendJSONSameAsEncodingJSON(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	odd := []string{"", "plain", `quo"te`, `back\slash`, "<html>&amp;", "tab\there", "nl\n", "\x00\x1f\x7f",
		"é ünïcödé", "\u2028\u2029", "bad \xff utf8", "pod-7f9c-x_1.a"}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 3))
		d := opDoc(odd[int(seed)%len(odd)], "run", seed, now, 1+int(seed%250), r)
		if seed%3 == 0 {
			d.Title, d.ID = odd[int(seed/3)%len(odd)], odd[int(seed/7)%len(odd)]
		}
		got, want := string(d.appendJSON(nil)), string(mustJSON(d))
		if got != want {
			t.Fatalf("seed %d:\n got  %s\n want %s", seed, got, want)
		}
	}
	for _, s := range odd {
		if got, want := string(appendJSONString(nil, s)), string(mustJSON(s)); got != want {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

func BenchmarkDocJSON(b *testing.B) {
	d := opDoc("inst", "run", 1, time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), 200, rand.New(rand.NewPCG(1, 2)))
	b.Run("appendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4096)
		for range b.N {
			buf = d.appendJSON(buf[:0])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = mustJSON(d)
		}
	})
}
