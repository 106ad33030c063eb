package config

import (
	"strings"
	"testing"
)

// TestGlobalMetricsHistograms: global.metrics.histograms takes compact or
// full (not set when absent or empty: compact, unless the flag says
// otherwise), names its key and line otherwise, and the dump writes the
// effective layout so that it parses back to itself.
func TestGlobalMetricsHistograms(t *testing.T) {
	const target = "targets:\n  - {name: a, backend: noop}\n"
	for _, c := range []struct {
		name, global string
		set, want    Histograms
	}{
		{"absent", "", "", HistogramsCompact},
		{"no metrics key", "global: {timeout: 1s}\n", "", HistogramsCompact},
		{"empty metrics", "global:\n  metrics:\n", "", HistogramsCompact},
		{"empty histograms", "global:\n  metrics: {histograms: }\n", "", HistogramsCompact},
		{"compact", "global:\n  metrics: {histograms: compact}\n", HistogramsCompact, HistogramsCompact},
		{"full", "global:\n  metrics:\n    histograms: full\n", HistogramsFull, HistogramsFull},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.global + target))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Global.Metrics.Histograms; got != c.set || got.Effective() != c.want {
				t.Errorf("histograms = %q (effective %q), want %q (effective %q)", got, got.Effective(), c.set, c.want)
			}
			dump, err := Dump(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if want := "    metrics:\n        histograms: " + string(c.want) + "\n"; !strings.Contains(string(dump), want) {
				t.Errorf("dump lacks %q:\n%s", want, dump)
			}
			again, err := Parse(dump)
			if err != nil {
				t.Fatalf("dump does not parse back: %v", err)
			}
			if got := again.Global.Metrics.Histograms; got != c.want { // set now
				t.Errorf("dump parses back to %q, want %q", got, c.want)
			}
		})
	}

	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown layout", "global:\n  metrics:\n    histograms: fancy\n" + target, []string{
			`global.metrics.histograms: line 3: unknown histogram layout "fancy" (one of compact, full)`}},
		{"wrong case", "global: {metrics: {histograms: Full}}\n" + target, []string{
			`global.metrics.histograms: line 1: unknown histogram layout "Full" (one of compact, full)`}},
		{"a list", "global:\n  metrics: {histograms: [full]}\n" + target, []string{
			`global.metrics.histograms: line 2: expected compact or full, got a list`}},
		{"misspelt key", "global:\n  metrics: {histogram: full}\n" + target, []string{
			`global.metrics.histogram: line 2: unknown field "histogram" (did you mean "histograms"?)`}},
		{"not a mapping", "global:\n  metrics: full\n" + target, []string{
			`global.metrics: line 2: expected a mapping, got "full"`}},
		// Every problem at once: the layout's and a target's.
		{"with another problem", "global:\n  metrics: {histograms: fancy}\n" + target + "  - {name: a, backend: noop}\n", []string{
			`global.metrics.histograms: line 2: unknown histogram layout "fancy" (one of compact, full)`,
			`targets[1].name: "a" is already used by targets[0]`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil {
				t.Fatal("config accepted")
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("errors:\n got: %q\nwant: %q", got, c.want)
			}
		})
	}
}
