//go:build integration

package faults

import (
	"math"
	"sort"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/dbcanary/dbcanary/internal/enginetest"
)

// hist is a snapshot of the histogram series matching a label filter, with
// both the classic buckets and the native (sparse, exponential) buckets.
// Two snapshots subtract, so a test reads exactly the samples recorded
// between them.
type hist struct {
	count   uint64
	sum     float64
	classic map[float64]uint64 // upper bound -> cumulative count
	schema  int32
	zero    uint64        // native zero bucket
	native  map[int]int64 // native bucket index -> count (positive values)
}

func snapshot(t testing.TB, h *enginetest.Harness, name string, l enginetest.L) hist {
	t.Helper()
	s := hist{classic: map[float64]uint64{}, native: map[int]int64{}, schema: math.MaxInt32}
	for _, m := range h.Find(t, name, l) {
		hm := m.GetHistogram()
		s.count += hm.GetSampleCount()
		s.sum += hm.GetSampleSum()
		for _, b := range hm.GetBucket() {
			s.classic[b.GetUpperBound()] += b.GetCumulativeCount()
		}
		s = s.add(decodeNative(hm))
	}
	return s
}

// decodeNative expands spans and delta-encoded counts into index -> count.
func decodeNative(hm *dto.Histogram) hist {
	n := hist{schema: hm.GetSchema(), zero: hm.GetZeroCount(), native: map[int]int64{}}
	idx, count := 0, int64(0)
	deltas := hm.GetPositiveDelta()
	k := 0
	for i, sp := range hm.GetPositiveSpan() {
		if i == 0 {
			idx = int(sp.GetOffset())
		} else {
			idx += int(sp.GetOffset())
		}
		for j := uint32(0); j < sp.GetLength() && k < len(deltas); j++ {
			count += deltas[k]
			k++
			if count != 0 {
				n.native[idx] += count
			}
			idx++
		}
	}
	return n
}

// rescale returns the native buckets at a coarser (lower) schema: Prometheus'
// mapping, bucket i at schema s goes to ((i-1) >> (s-target)) + 1.
func (h hist) rescale(target int32) map[int]int64 {
	if h.schema == target || len(h.native) == 0 {
		return h.native
	}
	out := map[int]int64{}
	d := uint(h.schema - target)
	for i, c := range h.native {
		out[((i-1)>>d)+1] += c
	}
	return out
}

// add merges native buckets (used to sum series), at the coarser schema.
func (h hist) add(o hist) hist {
	if len(o.native) == 0 && o.zero == 0 {
		if h.schema == math.MaxInt32 {
			h.schema = o.schema
		}
		return h
	}
	sc := min(h.schema, o.schema)
	a, b := h.rescale(sc), o.rescale(sc)
	m := map[int]int64{}
	for i, c := range a {
		m[i] += c
	}
	for i, c := range b {
		m[i] += c
	}
	h.native, h.schema, h.zero = m, sc, h.zero+o.zero
	return h
}

// sub returns the samples recorded between an earlier snapshot and h.
func (h hist) sub(earlier hist) hist {
	d := hist{count: h.count - earlier.count, sum: h.sum - earlier.sum, classic: map[float64]uint64{}, zero: h.zero - earlier.zero}
	for ub, c := range h.classic {
		d.classic[ub] = c - earlier.classic[ub]
	}
	sc := min(h.schema, earlier.schema)
	if earlier.schema == math.MaxInt32 {
		sc = h.schema
	}
	d.schema = sc
	a, b := h.rescale(sc), earlier.rescale(sc)
	d.native = map[int]int64{}
	for i, c := range a {
		if v := c - b[i]; v != 0 {
			d.native[i] = v
		}
	}
	return d
}

func (h hist) mean() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.sum / float64(h.count)
}

// above counts the samples greater than a classic bucket bound (exact, since
// the bound is one of the classic buckets: 0.1, 0.25, 0.5, 1, 2.5, ...).
func (h hist) above(bound float64) uint64 {
	c, ok := h.classic[bound]
	if !ok {
		panic("not a classic bucket bound")
	}
	return h.count - c
}

// nativeQuantile estimates a quantile from the native buckets, interpolating
// geometrically inside the bucket that holds the rank (the buckets are
// exponential: at schema 3 each spans a factor 2^(1/8) = 1.09).
func (h hist) nativeQuantile(q float64) float64 {
	total := float64(h.zero)
	idx := make([]int, 0, len(h.native))
	for i, c := range h.native {
		idx = append(idx, i)
		total += float64(c)
	}
	if total == 0 {
		return math.NaN()
	}
	sort.Ints(idx)
	rank := q * total
	cum := float64(h.zero)
	if cum >= rank {
		return 0
	}
	base := math.Pow(2, math.Pow(2, -float64(h.schema)))
	for _, i := range idx {
		c := float64(h.native[i])
		if cum+c >= rank {
			upper := math.Pow(base, float64(i))
			lower := upper / base
			return lower * math.Pow(base, (rank-cum)/c)
		}
		cum += c
	}
	return math.Pow(base, float64(idx[len(idx)-1]))
}

// merge adds the samples of o to h (h may be the zero value).
func (h hist) merge(o hist) hist {
	if h.classic == nil {
		h = hist{classic: map[float64]uint64{}, native: map[int]int64{}, schema: math.MaxInt32}
	}
	out := hist{count: h.count + o.count, sum: h.sum + o.sum, classic: map[float64]uint64{}}
	for ub, c := range h.classic {
		out.classic[ub] += c
	}
	for ub, c := range o.classic {
		out.classic[ub] += c
	}
	n := hist{schema: h.schema, zero: h.zero, native: h.native}.add(o)
	out.schema, out.zero, out.native = n.schema, n.zero, n.native
	return out
}
