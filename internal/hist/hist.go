// Package hist counts durations in log-linear buckets (the HdrHistogram
// layout): exact below 2^bits ns, then 2^bits sub-buckets per power of two,
// so every quantile is within 2^-bits of the true value (0.8 % at 7 bits)
// from nanoseconds to about 20 minutes, in a fixed few KiB, and merging is
// adding. `dbcanary bench` and `dbcanary calibrate` report from it; the
// daemon exports Prometheus histograms instead.
package hist

import (
	"errors"
	"fmt"
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
	sum      int64 // ns: integral, so a merge adds it exactly
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
	h.sum += int64(d)
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
	return time.Duration(float64(h.sum) / float64(h.n))
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

// Bits is the layout's resolution: 2^Bits sub-buckets per power of two.
func (h *Histogram) Bits() uint { return h.bits }

// Merge adds o's values to h: the result is the histogram of the union of
// both value sets, bucket for bucket (count, sum, min and max exact).
func (h *Histogram) Merge(o *Histogram) error {
	if o.bits != h.bits {
		return fmt.Errorf("histograms of different resolutions (%d and %d sub-bucket bits) cannot be merged", h.bits, o.bits)
	}
	if o.n == 0 {
		return nil
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
	return nil
}

// Snapshot is a histogram as a report stores it: every non-empty bucket as
// [its lowest value in ns, its count], ascending, beside the exact count,
// sum, min and max. FromSnapshot turns it back into the same histogram.
type Snapshot struct {
	Bits    uint       `json:"sub_bucket_bits"`
	Count   uint64     `json:"count"`
	SumNS   int64      `json:"sum_ns"`
	MinNS   int64      `json:"min_ns"`
	MaxNS   int64      `json:"max_ns"`
	Buckets [][2]int64 `json:"buckets"`
}

// Snapshot returns the histogram's raw buckets.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bits: h.bits, Count: h.n, SumNS: h.sum, MinNS: int64(h.min), MaxNS: int64(h.max), Buckets: [][2]int64{}}
	for i, c := range h.counts {
		if c > 0 {
			low, _ := h.bucket(i)
			s.Buckets = append(s.Buckets, [2]int64{low, int64(c)})
		}
	}
	return s
}

// FromSnapshot rebuilds a histogram, checking that the snapshot is one: a
// known resolution, ascending bucket bounds of that layout, positive counts
// that add up to Count, and min <= max.
func FromSnapshot(s Snapshot) (*Histogram, error) {
	if s.Bits < 1 || s.Bits > 10 {
		return nil, fmt.Errorf("sub_bucket_bits %d: want 1..10", s.Bits)
	}
	h := New(s.Bits)
	var total uint64
	last := -1
	for _, b := range s.Buckets {
		i := h.index(b[0])
		if low, _ := h.bucket(i); low != b[0] || b[0] < 0 {
			return nil, fmt.Errorf("bucket %d ns is not a bucket bound of a %d-bit layout", b[0], s.Bits)
		}
		if i <= last {
			return nil, errors.New("buckets are not in ascending order")
		}
		if b[1] <= 0 {
			return nil, fmt.Errorf("bucket %d ns: count %d, want at least 1", b[0], b[1])
		}
		last = i
		h.counts[i] = uint64(b[1])
		total += uint64(b[1])
	}
	if total != s.Count {
		return nil, fmt.Errorf("buckets hold %d values, count says %d", total, s.Count)
	}
	if s.Count > 0 && s.MinNS > s.MaxNS {
		return nil, fmt.Errorf("min_ns %d above max_ns %d", s.MinNS, s.MaxNS)
	}
	h.n, h.sum, h.min, h.max = s.Count, s.SumNS, time.Duration(s.MinNS), time.Duration(s.MaxNS)
	return h, nil
}
