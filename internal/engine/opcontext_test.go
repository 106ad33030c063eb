package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestOpContextDeadline(t *testing.T) {
	w := newWorker()
	c := w.begin(context.Background(), time.Now().Add(30*time.Millisecond))
	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("deadline did not fire")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("err = %v", c.Err())
	}
	// Contexts derived by the standard library follow it.
	c2 := w.begin(context.Background(), time.Now().Add(30*time.Millisecond))
	derived, cancel := context.WithCancel(c2)
	defer cancel()
	select {
	case <-derived.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("derived context not cancelled at the deadline")
	}
	w.end(c2)
}

func TestOpContextLateTimerSparesNextOp(t *testing.T) {
	w := newWorker()
	c1 := w.begin(context.Background(), time.Now().Add(time.Millisecond))
	time.Sleep(5 * time.Millisecond) // c1's timer fires (or is about to)
	w.end(c1)
	c2 := w.begin(context.Background(), time.Now().Add(time.Hour))
	w.expire() // a stale fire must not cancel an op whose deadline is ahead
	if c2.Err() != nil {
		t.Fatalf("next op cancelled by a stale timer: %v", c2.Err())
	}
	w.end(c2)
	if !errors.Is(c2.Err(), context.Canceled) {
		t.Errorf("ended op err = %v, want Canceled", c2.Err())
	}
}
