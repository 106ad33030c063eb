package bench

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// The report names the reference run and dbcanary's peak RSS, in text and
// HTML; on Linux the RSS is measured.
func TestReportReproducesAndPeakRSS(t *testing.T) {
	if got := peakRSS(); runtime.GOOS == "linux" && got < 1<<20 {
		t.Fatalf("peak RSS %d bytes on Linux", got)
	}
	r := &Report{Profile: "p", Reproduces: "mongoose-v3.5-performance.txt, 1.2.2 Bandwidth", PeakRSSBytes: 44 << 20}
	var text, page bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Reproduces: mongoose-v3.5-performance.txt, 1.2.2 Bandwidth", "Peak RSS of dbcanary: 44.0 MiB"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"Reproduces: mongoose-v3.5-performance.txt, 1.2.2 Bandwidth", `<b id="peak-rss">44.0 MiB</b>`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A merged report names the reference run and the largest driver's peak RSS.
func TestMergeKeepsReproducesAndLargestRSS(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var reports []*Report
	for i := range 2 {
		r := driver(t, i, 2, record(mergeStart, samples(rng, 100, mergeStart), counted{}))
		r.Reproduces, r.PeakRSSBytes = "ref", int64(10+i)<<20
		reports = append(reports, r)
	}
	m, err := Merge(reports, []string{"a", "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Reproduces != "ref" || m.PeakRSSBytes != 11<<20 {
		t.Fatalf("merged: reproduces %q, peak RSS %d", m.Reproduces, m.PeakRSSBytes)
	}
}
