package probes

import (
	"errors"
	"testing"
	"time"
)

func TestBackoffDoublesToMaxAndStartsOverAfterSuccess(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 5 * time.Second}
	t0 := time.Unix(1000, 0)
	if err := b.Wait(t0); err != nil {
		t.Fatalf("a fresh backoff waits: %v", err)
	}
	boom := errors.New("boom")
	var got []time.Duration
	for range 5 {
		got = append(got, b.Fail(t0, boom))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	if err := b.Wait(t0.Add(5*time.Second - time.Nanosecond)); err != boom {
		t.Errorf("inside the wait: Wait = %v, want the last error", err)
	}
	if err := b.Wait(t0.Add(5 * time.Second)); err != nil {
		t.Errorf("after the wait: Wait = %v, want nil", err)
	}
	if b.Err() != boom {
		t.Errorf("Err = %v", b.Err())
	}
	b.Succeed()
	if b.Err() != nil || b.Wait(t0) != nil {
		t.Errorf("after a success: Err %v, Wait %v", b.Err(), b.Wait(t0))
	}
	if d := b.Fail(t0, boom); d != time.Second {
		t.Errorf("first failure after a success waits %s, want Min", d)
	}
}

func TestBackoffLastErrorWins(t *testing.T) {
	b := Backoff{Min: time.Millisecond, Max: time.Second}
	t0 := time.Unix(1000, 0)
	first, second := errors.New("first"), errors.New("second")
	b.Fail(t0, first)
	b.Fail(t0, second)
	if err := b.Wait(t0); err != second {
		t.Errorf("Wait = %v, want the latest error", err)
	}
}

func TestBackoffStopFailsEveryLaterAttempt(t *testing.T) {
	b := Backoff{Min: time.Millisecond, Max: time.Second}
	closed := errors.New("closed")
	b.Stop(closed)
	if err := b.Wait(time.Unix(1<<40, 0)); err != closed {
		t.Errorf("Wait after Stop = %v, want %v", err, closed)
	}
}
