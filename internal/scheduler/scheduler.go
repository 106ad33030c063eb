// Package scheduler fires ops on an open-loop schedule: the k-th run of an op
// is due at start + offset + k/rate whatever happened to earlier runs, so a
// stalled backend yields one slow sample per missed slot instead of hiding the
// stall behind a single slow request (no coordinated omission). It is the
// one open loop of the program: the daemon's targets (engine runner) and the
// open-loop stages of `dbcanary bench` (engine.Load, an entry that ends at
// the stage's duration or op count) both run on RunAhead.
package scheduler

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"time"
)

// Entry is one op's schedule. The daemon's entries run until the scheduler
// stops; a bench stage's entry ends at its duration or op count (End, Runs).
type Entry struct {
	// Interval between runs (1/rate).
	Interval time.Duration
	// Rate, when set, is used instead of Interval: run k is due exactly k/Rate
	// after the first, where an Interval is whole ns (IntervalOf(3) is 1/3 ns
	// short, so a 20 s stage at 3 ops/s would get a 61st run).
	Rate float64
	// Offset of the first run from the scheduler's start; use RandomOffset
	// to spread targets and ops over the interval.
	Offset time.Duration
	// End, when set, ends the entry: no run is due at or after the
	// scheduler's start + End.
	End time.Duration
	// Runs, when set, ends the entry after that many runs.
	Runs int64
}

// RandomOffset returns a uniformly random start offset within one interval.
func RandomOffset(interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(interval)))
}

// IntervalOf converts a rate in ops/s to an interval.
func IntervalOf(rate float64) time.Duration {
	return time.Duration(float64(time.Second) / rate)
}

// Dispatch is called once per due run with the entry's index and the time the
// run was meant to start. It must not block: the scheduler calls it inline.
type Dispatch func(entry int, intended time.Time)

// RunAhead fires the entries until ctx is done or every entry has ended (End,
// Runs; entries without either never end). Runs that fell due while the
// scheduler was late (a GC pause, a suspended VM) are all dispatched, each
// with its own intended time, so the caller sees the delay as latency.
// Each run is dispatched once its slot is at most lead away (never more than
// lead early), for a receiver that waits for the slot itself with a Waiter
// before starting the op: the op then starts on the goroutine that woke for
// it, and the hand-off to that goroutine happens before the slot instead of
// after it. Pass Lead; with lead 0 a run is dispatched on the Go timer, 0..1 ms
// after its slot.
func RunAhead(ctx context.Context, start time.Time, entries []Entry, lead time.Duration, dispatch Dispatch) {
	if len(entries) == 0 {
		<-ctx.Done()
		return
	}
	q := make(queue, 0, len(entries))
	for i, e := range entries {
		it := &item{entry: i, interval: e.Interval, base: start.Add(e.Offset), next: start.Add(e.Offset), runs: e.Runs}
		if e.Rate > 0 {
			it.exact = float64(time.Second) / e.Rate
		}
		if e.End > 0 {
			it.end = start.Add(e.End)
		}
		if !it.ended() {
			q = append(q, it)
		}
	}
	if len(q) == 0 {
		return
	}
	heap.Init(&q)
	lead = max(lead, 0)
	timer := time.NewTimer(time.Until(q[0].next) - lead)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		for q[0].next.Compare(now.Add(lead)) <= 0 {
			it := q[0]
			dispatch(it.entry, it.next)
			it.k++
			it.next = it.slot()
			if it.ended() {
				heap.Pop(&q)
			} else {
				heap.Fix(&q, 0)
			}
			if ctx.Err() != nil || len(q) == 0 {
				return
			}
		}
		timer.Reset(time.Until(q[0].next) - lead)
	}
}

type item struct {
	entry    int
	interval time.Duration
	exact    float64 // the interval in ns when set by a Rate
	base     time.Time
	next     time.Time
	end      time.Time // zero: none
	k, runs  int64     // runs 0: no bound
}

// slot is when run k is due, computed from the base so no rounding accumulates.
func (it *item) slot() time.Time {
	if it.exact > 0 {
		return it.base.Add(time.Duration(float64(it.k) * it.exact))
	}
	return it.base.Add(time.Duration(it.k) * it.interval)
}

// ended reports whether the entry has had its last run.
func (it *item) ended() bool {
	return (it.runs > 0 && it.k >= it.runs) || (!it.end.IsZero() && !it.next.Before(it.end))
}

type queue []*item

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(*item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
