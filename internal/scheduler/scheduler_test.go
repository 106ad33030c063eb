package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestIntendedTimesStayOnSchedule: a dispatch that blocks (a late scheduler)
// does not shift later runs: each keeps its own slot, and the missed ones are
// all dispatched with their original intended times.
func TestIntendedTimesStayOnSchedule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	start := time.Now()
	iv := 50 * time.Millisecond
	var mu sync.Mutex
	var got []time.Time
	Run(ctx, start, []Entry{{Interval: iv, Offset: 10 * time.Millisecond}}, func(_ int, intended time.Time) {
		mu.Lock()
		got = append(got, intended)
		n := len(got)
		mu.Unlock()
		if n == 3 {
			time.Sleep(300 * time.Millisecond) // the scheduler falls ~6 slots behind
		}
	})
	if len(got) < 18 || len(got) > 25 {
		t.Fatalf("got %d runs in 1.2 s at 20/s", len(got))
	}
	for k, at := range got {
		want := start.Add(10*time.Millisecond + time.Duration(k)*iv)
		if !at.Equal(want) {
			t.Fatalf("run %d intended at %v, want %v (slot drift)", k, at.Sub(start), want.Sub(start))
		}
	}
}

func TestSeveralEntriesInterleave(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	counts := make([]int, 2)
	Run(ctx, time.Now(), []Entry{{Interval: 100 * time.Millisecond}, {Interval: 25 * time.Millisecond}}, func(i int, _ time.Time) {
		counts[i]++
	})
	if counts[0] < 8 || counts[0] > 11 || counts[1] < 35 || counts[1] > 41 {
		t.Errorf("counts = %v, want ~[10 40]", counts)
	}
}

func TestFractionalRate(t *testing.T) {
	if iv := IntervalOf(0.2); iv != 5*time.Second {
		t.Errorf("IntervalOf(0.2) = %s", iv)
	}
	for range 100 {
		if o := RandomOffset(time.Second); o < 0 || o >= time.Second {
			t.Fatalf("offset %s outside [0, 1s)", o)
		}
	}
}

func TestNoEntriesWaitsForCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	Run(ctx, time.Now(), nil, func(int, time.Time) { t.Error("dispatched") })
}
