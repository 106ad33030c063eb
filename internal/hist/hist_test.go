package hist

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Quantiles stay within the resolution of the exact ones, across the range.
func TestQuantilesWithinResolution(t *testing.T) {
	for _, b := range []uint{Precise, Coarse} {
		h := New(b)
		var vals []time.Duration
		for range 20000 {
			v := time.Duration(rand.ExpFloat64() * float64(3*time.Millisecond))
			vals = append(vals, v)
			h.Record(v)
		}
		vals = append(vals, 5*time.Nanosecond, 40*time.Second)
		h.Record(5 * time.Nanosecond)
		h.Record(40 * time.Second)
		slices.Sort(vals)
		tol := 1.0 / float64(int(1)<<b)
		for _, q := range []float64{0.01, 0.25, 0.5, 0.9, 0.99, 0.999} {
			want := vals[int(q*float64(len(vals))+0.999999)-1]
			got := h.Quantile(q)
			if d := float64(got-want) / float64(want); d > tol || d < -tol {
				t.Errorf("bits %d: q%g = %s, exact %s (%+.2f %%, resolution %.2f %%)", b, q, got, want, d*100, tol*100)
			}
		}
		if h.Min() != vals[0] || h.Max() != 40*time.Second || h.Quantile(1) != 40*time.Second || h.Quantile(0) != vals[0] {
			t.Errorf("bits %d: min %s max %s q1 %s q0 %s", b, h.Min(), h.Max(), h.Quantile(1), h.Quantile(0))
		}
	}
}

func TestMergeAndRange(t *testing.T) {
	a, b := New(Precise), New(Precise)
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	b.Record(time.Hour) // beyond the range: top bucket, exact max
	a.Merge(b)
	if a.Count() != 3 || a.Max() != time.Hour || a.Min() != time.Millisecond || a.Mean() != (time.Hour+4*time.Millisecond)/3 {
		t.Fatalf("count %d min %s max %s mean %s", a.Count(), a.Min(), a.Max(), a.Mean())
	}
	if q := a.Quantile(0.5); q < 2980*time.Microsecond || q > 3020*time.Microsecond {
		t.Fatalf("median %s, want about 3ms", q)
	}
	if New(Coarse).Quantile(0.5) != 0 {
		t.Fatal("empty histogram has a median")
	}
}

// Merge adds every value of o (same bits) into h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
	for i, c := range o.counts {
		h.counts[i] += c
	}
}
