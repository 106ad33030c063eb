package history

import (
	"fmt"
	"time"
)

// GrowthBound says how much a metric of Sample may grow over one dbcanary
// process's life (after its warm-up): the least-squares slope times the
// span judged must stay within max(Rel x the mean, Abs).
type GrowthBound struct {
	Metric string // MetricRSS, MetricGoroutines, MetricOpenFDs, MetricSeries
	Rel    float64
	Abs    float64
	// Warmup is skipped at the start of each process; a process is judged
	// only when at least MinSpan of samples remain.
	Warmup, MinSpan time.Duration
}

// The metrics of Sample a GrowthBound names.
const (
	MetricRSS        = "rss_bytes"
	MetricGoroutines = "goroutines"
	MetricOpenFDs    = "open_fds"
	MetricSeries     = "series"
)

func (s Sample) value(metric string) (float64, bool) {
	switch metric {
	case MetricRSS:
		return s.RSS, true
	case MetricGoroutines:
		return s.Goroutines, true
	case MetricOpenFDs:
		return s.OpenFDs, true
	case MetricSeries: // the failure series created on first use apart (ReadScrape)
		return s.Series - s.FirstUse, true
	}
	return 0, false
}

// GrowthResult is one metric's verdict over the longest process life judged.
type GrowthResult struct {
	Metric  string
	Span    time.Duration // the samples judged
	N       int
	Mean    float64
	PerHour float64 // fitted slope
	Growth  float64 // PerHour x Span
	Limit   float64
	OK      bool
	Note    string
}

// growth judges each bound on the longest process life with enough samples.
func growth(samples []Sample, bounds []GrowthBound) []GrowthResult {
	var out []GrowthResult
	for _, b := range bounds {
		r := GrowthResult{Metric: b.Metric}
		seg := longestSegment(samples, b.Warmup)
		if len(seg) < 3 || seg[len(seg)-1].At.Sub(seg[0].At) < b.MinSpan {
			r.Note = fmt.Sprintf("no dbcanary process lived %s past its %s warm-up: not judged", b.MinSpan, b.Warmup)
			out = append(out, r)
			continue
		}
		xs, ys := make([]float64, len(seg)), make([]float64, len(seg))
		for i, s := range seg {
			v, ok := s.value(b.Metric)
			if !ok {
				r.Note = "unknown metric"
				break
			}
			xs[i], ys[i] = s.At.Sub(seg[0].At).Hours(), v
		}
		if r.Note != "" {
			out = append(out, r)
			continue
		}
		r.N, r.Span = len(seg), seg[len(seg)-1].At.Sub(seg[0].At)
		r.PerHour, r.Mean = slope(xs, ys)
		r.Growth = r.PerHour * r.Span.Hours()
		r.Limit = max(b.Rel*r.Mean, b.Abs)
		r.OK = r.Growth <= r.Limit
		out = append(out, r)
	}
	return out
}

// longestSegment is the longest run of samples of one process (same start
// time), without its first warmup.
func longestSegment(samples []Sample, warmup time.Duration) []Sample {
	var best, cur []Sample
	flush := func() {
		var kept []Sample
		for _, s := range cur {
			if s.At.Sub(cur[0].At) >= warmup {
				kept = append(kept, s)
			}
		}
		if spanOf(kept) > spanOf(best) {
			best = kept
		}
	}
	for _, s := range samples {
		if len(cur) > 0 && s.Start != cur[0].Start {
			flush()
			cur = nil
		}
		cur = append(cur, s)
	}
	if len(cur) > 0 {
		flush()
	}
	return best
}

func spanOf(s []Sample) time.Duration {
	if len(s) < 2 {
		return 0
	}
	return s[len(s)-1].At.Sub(s[0].At)
}

// slope is the least-squares slope of ys over xs, and the mean of ys.
func slope(xs, ys []float64) (float64, float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, sy / n
	}
	return (n*sxy - sx*sy) / den, sy / n
}
