package scheduler

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestIntendedTimesStayOnSchedule: a dispatch that blocks (a late scheduler)
// does not shift later runs: each keeps its own slot, and the missed ones are
// all dispatched with their original intended times. Fake clock (synctest).
func TestIntendedTimesStayOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 1195*time.Millisecond)
		defer cancel()
		start := time.Now()
		iv := 50 * time.Millisecond
		var got []time.Time
		Run(ctx, start, []Entry{{Interval: iv, Offset: 10 * time.Millisecond}}, func(_ int, intended time.Time) {
			got = append(got, intended)
			if len(got) == 3 {
				time.Sleep(300 * time.Millisecond) // the scheduler falls 6 slots behind
			}
		})
		if len(got) != 24 {
			t.Fatalf("got %d runs in 1.195 s at 20/s from 10 ms, want 24", len(got))
		}
		for k, at := range got {
			want := start.Add(10*time.Millisecond + time.Duration(k)*iv)
			if !at.Equal(want) {
				t.Fatalf("run %d intended at %v, want %v (slot drift)", k, at.Sub(start), want.Sub(start))
			}
		}
	})
}

func TestSeveralEntriesInterleave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 990*time.Millisecond)
		defer cancel()
		counts := make([]int, 2)
		Run(ctx, time.Now(), []Entry{{Interval: 100 * time.Millisecond}, {Interval: 25 * time.Millisecond}}, func(i int, _ time.Time) {
			counts[i]++
		})
		if counts[0] != 10 || counts[1] != 40 {
			t.Errorf("counts = %v, want [10 40]", counts)
		}
	})
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

// A bounded entry (a bench stage) ends at its End or after its Runs, each run
// on its exact k/Rate slot, and RunAhead returns right after the last one
// was dispatched (lead before its slot). Fake clock: testing/synctest.
func TestBoundedEntryEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry Entry
		want  int
	}{
		// 1/3 s in whole ns would fit a 16th run before 5 s.
		{"end at 3/s", Entry{Rate: 3, End: 5 * time.Second}, 15},
		{"end on a slot", Entry{Rate: 200, End: 500 * time.Millisecond}, 100},
		{"runs", Entry{Rate: 1000, Runs: 7}, 7},
		{"runs before end", Entry{Rate: 10, End: time.Minute, Runs: 4}, 4},
		{"end before runs", Entry{Rate: 10, End: 450 * time.Millisecond, Runs: 100}, 5},
		{"interval", Entry{Interval: 300 * time.Millisecond, Offset: 100 * time.Millisecond, End: time.Second}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var got []time.Time
				var at []time.Duration
				RunAhead(t.Context(), start, []Entry{tc.entry}, Lead, func(i int, intended time.Time) {
					got = append(got, intended)
					at = append(at, time.Since(start))
				})
				if len(got) != tc.want {
					t.Fatalf("%d runs, want %d", len(got), tc.want)
				}
				for k, s := range got {
					want := start.Add(tc.entry.Offset + time.Duration(k)*tc.entry.Interval)
					if tc.entry.Rate > 0 {
						want = start.Add(tc.entry.Offset + time.Duration(float64(k)*float64(time.Second)/tc.entry.Rate))
					}
					if !s.Equal(want) {
						t.Fatalf("run %d intended at %s, want %s", k, s.Sub(start), want.Sub(start))
					}
					if lead := s.Sub(start) - at[k]; lead < 0 || lead > Lead {
						t.Fatalf("run %d dispatched %s before its slot, want 0..%s", k, lead, Lead)
					}
				}
				if ret, last := time.Since(start), got[len(got)-1].Sub(start); ret > max(last-Lead, 0) {
					t.Fatalf("returned at %s, after the last run's dispatch (slot %s)", ret, last)
				}
			})
		})
	}
}

// An entry already over (End before its first slot) and a late dispatch:
// the bounded entry's missed runs are dispatched with their own slots, none
// at or after End, while an unbounded one runs on until ctx is done.
func TestBoundedBesideUnbounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 1950*time.Millisecond)
		defer cancel()
		start := time.Now()
		got := make([][]time.Duration, 3)
		Run(ctx, start, []Entry{{Rate: 10, End: time.Second}, {Interval: 100 * time.Millisecond}, {Rate: 10, Offset: time.Second, End: time.Second}},
			func(i int, intended time.Time) {
				got[i] = append(got[i], intended.Sub(start))
				if i == 0 && len(got[0]) == 3 {
					time.Sleep(450 * time.Millisecond) // the scheduler falls behind
				}
			})
		if len(got[0]) != 10 || len(got[1]) != 20 || len(got[2]) != 0 {
			t.Fatalf("runs per entry %d %d %d, want 10 20 0", len(got[0]), len(got[1]), len(got[2]))
		}
		for k, d := range got[0] {
			if d != time.Duration(k)*100*time.Millisecond {
				t.Fatalf("bounded run %d at %s", k, d)
			}
		}
	})
}

// Every entry over before the start: RunAhead returns at once.
func TestAllEntriesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		RunAhead(t.Context(), start, []Entry{{Rate: 5, Offset: time.Second, End: time.Second}}, Lead, func(int, time.Time) { t.Error("dispatched") })
		if d := time.Since(start); d != 0 {
			t.Errorf("returned after %s", d)
		}
	})
}

// Run is RunAhead without lead: each run dispatched on the Go timer, 0..1 ms after its slot.
func Run(ctx context.Context, start time.Time, entries []Entry, dispatch Dispatch) {
	RunAhead(ctx, start, entries, 0, dispatch)
}
