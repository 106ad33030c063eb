package history

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var testKinds = []Kind{
	{Name: "a-kill", Group: "a", Target: "a", Min: time.Minute, Max: 3 * time.Minute},
	{Name: "b-stop", Group: "b", Target: "b", Min: 5 * time.Minute, Max: 6 * time.Minute, Pages: []string{"DbcanaryTargetDown"}, Budget: 4 * time.Minute},
	{Name: "c-slow", Group: "c", Target: "c", Min: 2 * time.Minute, Max: 4 * time.Minute},
	{Name: "daemon-kill", Group: GroupDaemon, Min: 20 * time.Second, Max: 40 * time.Second},
}

var testPlan = Plan{Warmup: 2 * time.Minute, Tail: 3 * time.Minute, Separation: 2 * time.Minute, GapMin: 30 * time.Second, GapMax: 2 * time.Minute, Overlap: 0.4}

func TestScheduleReplays(t *testing.T) {
	a := Schedule(42, 2*time.Hour, testKinds, testPlan)
	b := Schedule(42, 2*time.Hour, testKinds, testPlan)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("one seed, two schedules:\n%s\n%s", Format(a), Format(b))
	}
	if c := Schedule(43, 2*time.Hour, testKinds, testPlan); reflect.DeepEqual(a, c) {
		t.Errorf("seeds 42 and 43 gave the same schedule")
	}
}

// TestScheduleShape: inside the run, no two faults of a group within the
// separation, daemon faults alone, and some overlap on different groups.
func TestScheduleShape(t *testing.T) {
	overlaps := 0
	for seed := range uint64(20) {
		run := 2 * time.Hour
		s := Schedule(seed, run, testKinds, testPlan)
		if len(s) < 10 {
			t.Fatalf("seed %d: %d faults in %s:\n%s", seed, len(s), run, Format(s))
		}
		for i, p := range s {
			if p.At < testPlan.Warmup || p.End() > run-testPlan.Tail {
				t.Errorf("seed %d: fault %d outside the run: %+v", seed, p.Seq, p)
			}
			for _, o := range s[i+1:] {
				together := o.At < p.End()+testPlan.Separation && p.At < o.End()+testPlan.Separation
				if together && (o.Group == p.Group || o.Group == GroupDaemon || p.Group == GroupDaemon) {
					t.Errorf("seed %d: faults %d and %d overlap:\n%s", seed, p.Seq, o.Seq, Format(s))
				}
				if o.At < p.End() {
					overlaps++
				}
			}
		}
	}
	if overlaps == 0 {
		t.Error("no two faults ever overlapped")
	}
}

func TestValidate(t *testing.T) {
	if err := Validate(testKinds); err != nil {
		t.Fatal(err)
	}
	bad := append([]Kind(nil), testKinds...)
	bad[1].Min = time.Minute
	if err := Validate(bad); err == nil || !strings.Contains(err.Error(), `"b-stop": held 1m0s, shorter than its page budget 4m0s`) {
		t.Errorf("got %v", err)
	}
}

// A kind with NotBefore is never drawn earlier in the run.
func TestScheduleNotBefore(t *testing.T) {
	kinds := append(slices.Clone(testKinds), Kind{Name: "late-only", Group: "d", Target: "d", Min: time.Minute, Max: 2 * time.Minute, NotBefore: time.Hour, Weight: 3})
	drawn := 0
	for seed := range uint64(20) {
		for _, p := range Schedule(seed, 2*time.Hour, kinds, testPlan) {
			if p.Kind == "late-only" {
				drawn++
				if p.At < time.Hour {
					t.Errorf("seed %d: late-only drawn at +%s, before its NotBefore 1h", seed, p.At)
				}
			}
		}
	}
	if drawn == 0 {
		t.Error("late-only never drawn in 20 two-hour schedules")
	}
}
