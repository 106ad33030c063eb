package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"
)

// No latency figure is asserted here: the tests run on loaded shared
// machines. They check what must hold whatever the load: a wait never ends
// before its slot, cancellation ends it, a full precise phase falls back.

// TestUntilNeverEarly: every path (already due, precise phase, plain timer
// then precise phase) returns at or after the slot, measured with the same
// clock the engine uses (time.Now, monotonic).
func TestUntilNeverEarly(t *testing.T) {
	w := NewWaiter()
	defer w.Stop()
	ctx := context.Background()
	offsets := []time.Duration{-time.Millisecond, 0, time.Microsecond, 30 * time.Microsecond, 200 * time.Microsecond,
		Lead / 2, Lead - time.Microsecond, Lead, Lead + 100*time.Microsecond, 3 * Lead, 7*time.Millisecond + 321*time.Microsecond}
	for range 3 {
		for _, off := range offsets {
			slot := time.Now().Add(off)
			if !w.Until(ctx, slot) {
				t.Fatalf("Until(now%+v) = false without cancellation", off)
			}
			if now := time.Now(); now.Before(slot) {
				t.Fatalf("Until(now%+v) returned %v before the slot", off, slot.Sub(now))
			}
		}
	}
	if fineSupported && w.precise == 0 {
		t.Errorf("no wait used the precise phase (fell back %d times)", w.fellBack)
	}
}

// TestUntilConcurrentNeverEarly: many goroutines due at once, more than the
// precise phase admits: every one still returns at or after its slot, and
// the wait either used the precise phase or fell back to the timer.
func TestUntilConcurrentNeverEarly(t *testing.T) {
	const n = 4 * MaxPrecise
	var wg sync.WaitGroup
	var mu sync.Mutex
	var precise, fellBack int
	for round := range 3 {
		slot := time.Now().Add(Lead + 2*time.Millisecond)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := NewWaiter()
				defer w.Stop()
				s := slot.Add(time.Duration(i*round) * time.Microsecond)
				if !w.Until(context.Background(), s) {
					t.Error("Until = false without cancellation")
				}
				if now := time.Now(); now.Before(s) {
					t.Errorf("returned %v before the slot", s.Sub(now))
				}
				mu.Lock()
				precise += w.precise
				fellBack += w.fellBack
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	if len(preciseGate) != 0 {
		t.Errorf("%d precise-phase permits still held", len(preciseGate))
	}
	t.Logf("precise %d, fell back %d", precise, fellBack)
}

// TestUntilFallsBackWhenFull: with every precise-phase permit taken the wait
// uses the plain timer to the slot, still never early, and takes no permit.
func TestUntilFallsBackWhenFull(t *testing.T) {
	if !fineSupported {
		t.Skip("no precise phase on this OS")
	}
	gate := make(chan struct{}, 2)
	gate <- struct{}{}
	gate <- struct{}{}
	w := &Waiter{timer: time.NewTimer(time.Hour), gate: gate}
	defer w.Stop()
	for _, off := range []time.Duration{100 * time.Microsecond, Lead / 2, 3 * Lead} {
		slot := time.Now().Add(off)
		if !w.Until(context.Background(), slot) {
			t.Fatal("Until = false without cancellation")
		}
		if now := time.Now(); now.Before(slot) {
			t.Fatalf("returned %v before the slot", slot.Sub(now))
		}
	}
	if w.precise != 0 || w.fellBack == 0 {
		t.Errorf("precise %d, fell back %d: want 0 and > 0", w.precise, w.fellBack)
	}
	if len(gate) != 2 {
		t.Errorf("gate holds %d permits, want the 2 taken before", len(gate))
	}
	// A freed permit is used again (retried: a wait descheduled past its
	// slot on a loaded machine needs no precise phase).
	<-gate
	for range 20 {
		w.Until(context.Background(), time.Now().Add(Lead/2))
		if w.precise > 0 {
			break
		}
	}
	if w.precise == 0 {
		t.Error("a freed permit was not used")
	}
	if len(gate) != 1 {
		t.Errorf("gate holds %d permits, want the 1 still taken", len(gate))
	}
}

// TestUntilCancel: cancelling the context ends a long wait (in the timer
// phase) and Until reports it; an already cancelled context does not wait.
func TestUntilCancel(t *testing.T) {
	w := NewWaiter()
	defer w.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- w.Until(ctx, time.Now().Add(time.Hour)) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Error("Until = true after cancellation")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Until did not return after cancellation")
	}
	if w.Until(ctx, time.Now().Add(time.Minute)) {
		t.Error("Until with a cancelled context = true")
	}
	// A slot already due is reached whatever the context says.
	if !w.Until(ctx, time.Now().Add(-time.Second)) {
		t.Error("Until of a past slot = false")
	}
}

// TestLearnOvershootBounded: the early-wake estimate moves towards low
// overshoots and stays within [0, maxEarly].
func TestLearnOvershootBounded(t *testing.T) {
	saved := fineEarly.Load()
	defer fineEarly.Store(saved)
	fineEarly.Store(int64(20 * time.Microsecond))
	for range 1000 {
		learnOvershoot(time.Duration(fineEarly.Load()), time.Second)
	}
	if e := time.Duration(fineEarly.Load()); e != maxEarly {
		t.Errorf("after huge overshoots early = %v, want the bound %v", e, maxEarly)
	}
	for range 1000 {
		learnOvershoot(time.Duration(fineEarly.Load()), 0)
	}
	if e := fineEarly.Load(); e != 0 {
		t.Errorf("after zero overshoots early = %v, want 0", time.Duration(e))
	}
	// Overshoots of 10 µs (80 %) and 40 µs (20 %): the estimate settles
	// between them, near the 20th percentile's neighbourhood, not above 40.
	for i := range 5000 {
		o := 10 * time.Microsecond
		if i%5 == 0 {
			o = 40 * time.Microsecond
		}
		learnOvershoot(time.Duration(fineEarly.Load()), o)
	}
	if e := time.Duration(fineEarly.Load()); e < 5*time.Microsecond || e > 12*time.Microsecond {
		t.Errorf("early = %v for overshoots of 10 µs (80 %%) and 40 µs (20 %%), want ~10 µs", e)
	}
}

// TestRunAheadDispatchesWithinLead: with a lead, a run is dispatched no
// more than lead before its slot and keeps its own intended time; with
// none (Run), never before it.
func TestRunAheadDispatchesWithinLead(t *testing.T) {
	for _, lead := range []time.Duration{0, Lead} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		iv := 10 * time.Millisecond
		var n int
		RunAhead(ctx, start, []Entry{{Interval: iv, Offset: 3 * time.Millisecond}}, lead, func(_ int, intended time.Time) {
			now := time.Now()
			if want := start.Add(3*time.Millisecond + time.Duration(n)*iv); !intended.Equal(want) {
				t.Errorf("lead %v: run %d intended at %v, want %v", lead, n, intended.Sub(start), want.Sub(start))
			}
			if early := intended.Sub(now); early > lead {
				t.Errorf("lead %v: run %d dispatched %v before its slot", lead, n, early)
			}
			n++
		})
		cancel()
		if n == 0 {
			t.Errorf("lead %v: nothing dispatched in 300 ms at 100/s", lead)
		}
	}
}

// The precise phase's rate budget: a burst of waits gets at most the burst
// (plus what accrues meanwhile), then falls back; waits within the rate pass.
func TestPreciseRateBudget(t *testing.T) {
	budget := newPreciseBudget() // the process's own stays full for the other tests
	t0 := time.Now()
	ok := 0
	for range 10 * preciseBurst {
		if budget.Allow() {
			ok++
		}
	}
	accrued := int(time.Since(t0)*MaxPreciseRate/time.Second) + 1
	if ok < preciseBurst || ok > preciseBurst+accrued {
		t.Fatalf("a burst of %d waits got %d precise, want %d (+%d accrued)", 10*preciseBurst, ok, preciseBurst, accrued)
	}
}
