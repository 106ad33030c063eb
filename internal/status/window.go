package status

import (
	"math"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// numCauses sizes the outcome counters; the cause set is fixed at build time.
var numCauses = len(probes.Causes)

// causeIndex maps a cause to its counter; unknown causes count as other.
func causeIndex(c probes.Cause) int {
	for i, k := range probes.Causes {
		if k == c {
			return i
		}
	}
	return otherIndex
}

var otherIndex = func() int {
	for i, k := range probes.Causes {
		if k == probes.CauseOther {
			return i
		}
	}
	panic("probes.Causes has no CauseOther")
}()

// failRing holds an op's outcome counts for each of the last len(minute)
// minutes: fixed memory, allocated once per op, whatever the op rate or error
// rate. Slot i holds minute[i] (a unix minute; an older one is stale), its
// successes ok[i], and its failures per cause in byCause[i*numCauses:].
type failRing struct {
	minute  []int64
	ok      []uint32
	byCause []uint32
}

func newFailRing(minutes int) failRing {
	return failRing{minute: make([]int64, minutes), ok: make([]uint32, minutes), byCause: make([]uint32, minutes*numCauses)}
}

func (r *failRing) add(t time.Time, cause probes.Cause, failed bool) {
	m := t.Unix() / 60
	i := int(m % int64(len(r.minute)))
	counts := r.byCause[i*numCauses : (i+1)*numCauses]
	if r.minute[i] != m {
		r.minute[i], r.ok[i] = m, 0
		clear(counts)
	}
	if failed {
		counts[causeIndex(cause)]++
	} else {
		r.ok[i]++
	}
}

// sum adds up the minutes within the window ending at now into byCause
// (len numCauses) and returns the successes.
func (r *failRing) sum(now time.Time, byCause []uint64) (ok uint64) {
	cur := now.Unix() / 60
	for i, m := range r.minute {
		if m <= cur-int64(len(r.minute)) || m > cur {
			continue
		}
		ok += uint64(r.ok[i])
		for c, n := range r.byCause[i*numCauses : (i+1)*numCauses] {
			byCause[c] += uint64(n)
		}
	}
	return ok
}

// Latency histogram: log-scale buckets, 4 per octave (each ~19% wide), from
// latMin to latMin·2^((latBuckets-2)/4) ≈ 22 minutes; bucket 0 holds anything
// below latMin and the last bucket anything above.
const (
	latMin        = 10 * time.Microsecond
	latPerOctave  = 4
	latBuckets    = 112
	latSlotLength = time.Minute
	latSlots      = 5 // the window: the current minute and the four before it
)

// LatencyWindow is how far back p50 and p99 look (at most; at least
// LatencyWindow minus one minute, as slots are whole minutes).
const LatencyWindow = latSlots * latSlotLength

func latBucket(d time.Duration) int {
	if d < latMin {
		return 0
	}
	i := 1 + int(math.Floor(latPerOctave*math.Log2(float64(d)/float64(latMin))))
	return min(i, latBuckets-1)
}

// latValue is bucket i's representative latency: its geometric middle.
func latValue(i int) time.Duration {
	if i == 0 {
		return latMin / 2
	}
	return time.Duration(float64(latMin) * math.Exp2((float64(i)-0.5)/latPerOctave))
}

type latSlot struct {
	slot     int64 // unix minute
	n        uint32
	min, max time.Duration
	counts   [latBuckets]uint32
}

// latRing is a small fixed-size histogram per minute over the last few
// minutes: quantiles within ~10% of the true value, clamped to the exact
// minimum and maximum seen, at a fixed ~2.3 KiB per op.
type latRing struct{ slots [latSlots]latSlot }

func (r *latRing) add(t time.Time, d time.Duration) {
	m := t.Unix() / int64(latSlotLength/time.Second)
	s := &r.slots[int(m%latSlots)]
	if s.slot != m {
		*s = latSlot{slot: m}
	}
	if s.n == 0 || d < s.min {
		s.min = d
	}
	if s.n == 0 || d > s.max {
		s.max = d
	}
	if s.n < math.MaxUint32 {
		s.n++
		s.counts[latBucket(d)]++
	}
}

// merged is the window's histogram ending at now.
type merged struct {
	n        uint64
	min, max time.Duration
	counts   [latBuckets]uint64
}

func (r *latRing) merge(now time.Time) merged {
	var out merged
	cur := now.Unix() / int64(latSlotLength/time.Second)
	for i := range r.slots {
		s := &r.slots[i]
		if s.n == 0 || s.slot <= cur-latSlots || s.slot > cur {
			continue
		}
		if out.n == 0 || s.min < out.min {
			out.min = s.min
		}
		if out.n == 0 || s.max > out.max {
			out.max = s.max
		}
		out.n += uint64(s.n)
		for b, c := range s.counts {
			out.counts[b] += uint64(c)
		}
	}
	return out
}

// quantile returns the q-quantile (0 < q <= 1) of the merged window, 0 if empty.
func (m *merged) quantile(q float64) time.Duration {
	if m.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(m.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range m.counts {
		seen += c
		if seen >= rank {
			return min(max(latValue(i), m.min), m.max)
		}
	}
	return m.max
}
