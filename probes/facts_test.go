package probes

import (
	"strings"
	"testing"
)

// TestFactsCheck: Register refuses facts the generator could not draw.
func TestFactsCheck(t *testing.T) {
	ok := Facts{Title: "X", Ops: []OpFacts{{Name: "put"}, {Name: "get", Phases: []string{"first", "last"}}},
		Panels: []Panel{{Title: "p", ThresholdsOf: "put", Queries: []Query{{Series: SeriesLatency, Ops: "put|get", Quantile: 0.99, Legend: "{{op}}"}}}}}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	if err := (Facts{NoBoard: true}).check(); err != nil {
		t.Fatal(err)
	}
	for want, mutate := range map[string]func(*Facts){
		"NoBoard with":      func(f *Facts) { f.NoBoard = true },
		"a title and":       func(f *Facts) { f.Title = "" },
		"listed twice":      func(f *Facts) { f.Ops = append(f.Ops, OpFacts{Name: "put"}) },
		"phase \"first\"":   func(f *Facts) { f.Ops[1].Phases = []string{"first", "first"} },
		"not an op without": func(f *Facts) { f.Panels[0].ThresholdsOf = "get" },
		"unknown series":    func(f *Facts) { f.Panels[0].Queries[0].Series = "cpu" },
		"match no op":       func(f *Facts) { f.Panels[0].Queries[0].Ops = "list" },
		"a direction of":    func(f *Facts) { f.Panels[0].Queries[0].Direction = "sent" },
		"without a legend":  func(f *Facts) { f.Panels[0].Queries[0].Legend = "" },
		"missing closing )": func(f *Facts) { f.Panels[0].Queries[0].Ops = "(put" },
		"queries of series": func(f *Facts) {
			f.Panels[0].Queries = append(f.Panels[0].Queries, Query{Series: SeriesBytes, Legend: "x"})
		},
		"a quantile of bytes": func(f *Facts) { f.Panels[0].Queries[0].Series = SeriesBytes },
	} {
		f := ok
		f.Ops = append([]OpFacts(nil), ok.Ops...)
		f.Panels = []Panel{ok.Panels[0]}
		f.Panels[0].Queries = append([]Query(nil), ok.Panels[0].Queries...)
		mutate(&f)
		if err := f.check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}
