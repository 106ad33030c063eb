package engine

import (
	"sync"
	"time"
)

// Flight is what a counter of runs in flight has seen: Area, the count
// integrated over time (its time average over a window is the difference of
// two Areas divided by the window), and Peak, the highest count since the
// previous read.
type Flight struct {
	Area time.Duration
	Peak int64
}

// flightCounter counts runs in flight at each start and end, so the time
// average and the maximum are exact: no sampler wakes up to look (one that
// woke every 10 ms cost bench two thirds of its CPU at 10 ops/s).
type flightCounter struct {
	mu   sync.Mutex
	n    int64
	peak int64
	area time.Duration // ∫ n dt up to last
	last time.Time
}

// add moves the count by d (+1 at a start, -1 at an end) at now.
func (c *flightCounter) add(now time.Time, d int64) {
	c.mu.Lock()
	c.advance(now)
	c.n += d
	c.peak = max(c.peak, c.n)
	c.mu.Unlock()
}

// advance integrates the count up to now; the caller holds mu.
func (c *flightCounter) advance(now time.Time) {
	if !c.last.IsZero() && now.After(c.last) {
		c.area += time.Duration(c.n) * now.Sub(c.last)
	}
	if now.After(c.last) {
		c.last = now
	}
}

// read returns the area up to now and the peak since the previous read,
// and starts the next peak at the count in flight now.
func (c *flightCounter) read(now time.Time) Flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	f := Flight{Area: c.area, Peak: c.peak}
	c.peak = c.n
	return f
}
