// Package hist counts durations in log-linear buckets (the HdrHistogram
// layout): exact below 2^bits ns, then 2^bits sub-buckets per power of two,
// so every quantile is within 2^-bits of the true value (0.8 % at 7 bits)
// from nanoseconds to about 20 minutes, in a fixed few KiB, and merging is
// adding. `dbcanary bench` and `dbcanary calibrate` report from it; the
// daemon exports Prometheus histograms instead.
package hist

import (
	"math"
	"math/bits"
	"time"
)

// Precise is the resolution of whole-run histograms (< 0.8 % error); Coarse
// of the per-interval ones behind the plots (< 6.3 %).
const (
	Precise = 7
	Coarse  = 4
)

// maxExp bounds the range: values at or above 2^(maxExp+bits) ns land in the
// top bucket (2^41 ns is 36 minutes).
const maxExp = 41

// Histogram is not safe for concurrent use.
type Histogram struct {
	bits     uint
	counts   []uint64
	n        uint64
	sum      float64 // ns
	min, max time.Duration
}

// New returns an empty histogram with 2^bits sub-buckets per power of two.
func New(bits uint) *Histogram {
	sub := 1 << bits
	return &Histogram{bits: bits, counts: make([]uint64, sub+(maxExp-int(bits))*sub)}
}

func (h *Histogram) index(v int64) int {
	sub := int64(1) << h.bits
	if v < sub {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - int(h.bits) - 1
	i := int(sub) + shift*int(sub) + int(v>>uint(shift)-sub)
	return min(i, len(h.counts)-1)
}

// bucket returns the lowest value of bucket i and its width.
func (h *Histogram) bucket(i int) (low, width int64) {
	sub := 1 << h.bits
	if i < sub {
		return int64(i), 1
	}
	shift := (i - sub) / sub
	m := int64(sub + (i-sub)%sub)
	return m << uint(shift), 1 << uint(shift)
}

// Record adds one value.
func (h *Histogram) Record(d time.Duration) {
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += float64(d)
	h.counts[h.index(int64(d))]++
}

// Count is the number of values.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are exact.
func (h *Histogram) Min() time.Duration { return h.min }

// Max is the largest value recorded.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is exact.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value at q (0..1): the middle of the bucket holding
// the ceil(q·n)-th smallest value, clamped to the exact min and max (which
// the first and last ranks return).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	switch rank {
	case 1:
		return h.min
	case h.n:
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := h.bucket(i)
			v := time.Duration(low + (width-1)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}
