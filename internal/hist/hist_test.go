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
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
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

// A merge of histograms is the histogram of the union of their values,
// bucket for bucket, and a snapshot rebuilds the same histogram.
func TestMergeIsUnion(t *testing.T) {
	for _, b := range []uint{Precise, Coarse} {
		union := New(b)
		parts := []*Histogram{New(b), New(b), New(b)}
		for i := range 30000 {
			v := time.Duration(rand.ExpFloat64() * float64(time.Duration(i%3+1)*time.Millisecond))
			parts[i%3].Record(v)
			union.Record(v)
		}
		merged := New(b)
		for _, p := range parts {
			s, err := FromSnapshot(p.Snapshot())
			if err != nil {
				t.Fatal(err)
			}
			if err := merged.Merge(s); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(merged.counts, union.counts) || merged.n != union.n || merged.sum != union.sum ||
			merged.min != union.min || merged.max != union.max {
			t.Fatalf("bits %d: merged histogram differs from the union's", b)
		}
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
			if m, u := merged.Quantile(q), union.Quantile(q); m != u {
				t.Errorf("bits %d: q%g merged %s, union %s", b, q, m, u)
			}
		}
		if merged.Mean() != union.Mean() {
			t.Errorf("bits %d: mean merged %s, union %s", b, merged.Mean(), union.Mean())
		}
	}
	if err := New(Precise).Merge(New(Coarse)); err == nil {
		t.Error("merging a 7-bit and a 4-bit histogram: no error")
	}
	empty := New(Coarse)
	if err := empty.Merge(New(Coarse)); err != nil || empty.Count() != 0 || empty.Min() != 0 {
		t.Errorf("merging empty histograms: %v, count %d, min %s", err, empty.Count(), empty.Min())
	}
}

func TestSnapshotRefusesWhatIsNotOne(t *testing.T) {
	h := New(Coarse)
	h.Record(1000)
	h.Record(5000)
	good := h.Snapshot()
	for _, c := range []struct {
		name string
		edit func(s *Snapshot)
		want string
	}{
		{"bits", func(s *Snapshot) { s.Bits = 0 }, "sub_bucket_bits 0: want 1..10"},
		{"bound", func(s *Snapshot) { s.Buckets[0][0]++ }, "bucket 993 ns is not a bucket bound of a 4-bit layout"},
		{"order", func(s *Snapshot) { s.Buckets[0], s.Buckets[1] = s.Buckets[1], s.Buckets[0] }, "buckets are not in ascending order"},
		{"zero", func(s *Snapshot) { s.Buckets[0][1] = 0 }, "bucket 992 ns: count 0, want at least 1"},
		{"count", func(s *Snapshot) { s.Count = 3 }, "buckets hold 2 values, count says 3"},
		{"minmax", func(s *Snapshot) { s.MinNS = 6000 }, "min_ns 6000 above max_ns 5000"},
	} {
		s := good
		s.Buckets = slices.Clone(good.Buckets)
		c.edit(&s)
		if _, err := FromSnapshot(s); err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
