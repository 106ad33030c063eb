package generate

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/dbcanary/dbcanary/internal/metrics"
)

// bucketQuantile is PromQL's histogram_quantile over classic buckets
// (promql/quantile.go): the bucket holding the rank, linear inside it, the
// highest finite bound when the rank falls in +Inf.
func bucketQuantile(q float64, bounds []float64, samples []float64) float64 {
	b := append(append([]float64(nil), bounds...), math.Inf(1))
	sort.Float64s(b)
	cum := make([]float64, len(b))
	for _, v := range samples {
		for i, ub := range b {
			if v <= ub {
				cum[i]++
			}
		}
	}
	total := cum[len(cum)-1]
	if total == 0 || len(b) < 2 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(b)-1, func(i int) bool { return cum[i] >= rank })
	if i == len(b)-1 {
		return b[len(b)-2]
	}
	start, count := 0.0, cum[i]
	if i > 0 {
		start = b[i-1]
		count -= cum[i-1]
		rank -= cum[i-1]
	}
	return start + (b[i]-start)*(rank/count)
}

// TestCompactLayoutFiresLikeFull: the latency rules compare a recorded
// quantile with a threshold that is a classic bound in both layouts, so
// "p99 > threshold" holds exactly when more than 1 % of the samples are
// above it, whatever the other bounds: the compact layout
// (--metrics.histograms, the default) fires every shipped latency rule on
// the same samples as the full one, though the quantile's value between
// bounds differs (docs/sizing.md). Checked on random sample sets around
// every shipped threshold.
func TestCompactLayoutFiresLikeFull(t *testing.T) {
	b := shippedBaseline(t)
	th, err := Thresholds(b)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(24, 1))
	checked := 0
	for _, x := range th {
		compact := metrics.Options{}.Bounds(x.Backend, x.Op, x.Phase)
		for range 200 {
			n := 1 + rng.IntN(400)
			samples := make([]float64, n)
			for i := range samples {
				// Log-uniform from a tenth to three times the threshold, with
				// a few timeouts far above it.
				samples[i] = x.Bound * math.Exp(rng.Float64()*math.Log(30)) / 10
				if rng.IntN(50) == 0 {
					samples[i] = 5.1
				}
			}
			for _, q := range Quantiles {
				c, f := bucketQuantile(q, compact, samples), bucketQuantile(q, metrics.LatencyBuckets, samples)
				if (c > x.Bound) != (f > x.Bound) {
					t.Fatalf("%s %s %s: p%g is %g with compact bounds %v and %g with full: they disagree about the threshold %g",
						x.Backend, x.Op, x.Phase, q*100, c, compact, f, x.Bound)
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no threshold checked")
	}
}
