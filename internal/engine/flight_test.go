package engine

import (
	"testing"
	"time"
)

// The counter integrates the count exactly between changes, and each read
// starts the next peak at the count in flight.
func TestFlightCounter(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var c flightCounter
	c.add(at(0), 1)    // 1 in flight
	c.add(at(100), 1)  // 2
	c.add(at(300), -1) // 1
	c.add(at(300), 1)  // 2 again, at the same instant
	c.add(at(400), -1)
	// 0-100: 1, 100-300: 2, 300-400: 2, 400-500: 1 = 100+400+200+100 ms.
	if f := c.read(at(500)); f.Area != 800*time.Millisecond || f.Peak != 2 {
		t.Errorf("first read %+v, want 800ms, peak 2", f)
	}
	c.add(at(600), -1)
	// The next peak starts at the 1 in flight at the read.
	if f := c.read(at(700)); f.Area != 900*time.Millisecond || f.Peak != 1 {
		t.Errorf("second read %+v, want 900ms, peak 1", f)
	}
	if f := c.read(at(800)); f.Area != 900*time.Millisecond || f.Peak != 0 {
		t.Errorf("idle read %+v, want the same area, peak 0", f)
	}
}
