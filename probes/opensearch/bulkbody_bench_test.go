//go:build linux

package opensearch

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// oldBulkBody is the bulk body as p.bulk built it before the bulkWriter: a
// seq, a generator and the time per document, opDoc, then appendJSON.
func oldBulkBody(p *Probe, index string, n int) ([]byte, []Document) {
	docs := make([]Document, n)
	for i := range docs {
		docs[i] = p.newDoc()
	}
	return docsBulkBody(mustJSON(writeAlias(index)), docs), docs
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBulkBody compares the bulk body of 500 default documents (200
// body words) written by the bulkWriter with the document-by-document one it
// replaced: ns/doc and allocs/doc side by side in one run.
func BenchmarkBulkBody(b *testing.B) {
	const n = 500
	for _, c := range []struct {
		name string
		body func(*Probe, string, int) ([]byte, []Document)
	}{{"before", oldBulkBody}, {"bulkWriter", (*Probe).bulkBody}} {
		b.Run(c.name, func(b *testing.B) {
			p := &Probe{instance: "dbcanary-0123456789ab", run: "k3j9x0", now: time.Now, cfg: Config{BodyWords: 200, BulkSize: n}}
			var size int
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			cpu0 := cpuTime()
			for b.Loop() {
				body, _ := c.body(p, "dbcanary-os-2025.03.04", n)
				size = len(body)
			}
			cpu := cpuTime() - cpu0
			runtime.ReadMemStats(&m1)
			docs := float64(b.N * n)
			// CPU time of the process (GC included): what a loaded machine's wall clock hides.
			b.ReportMetric(float64(cpu.Nanoseconds())/docs, "cpu-ns/doc")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/docs, "ns/doc")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/docs, "allocs/doc")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/docs, "B-alloc/doc")
			b.ReportMetric(float64(size)/n, "B-json/doc")
		})
	}
}
