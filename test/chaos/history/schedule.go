// Package history is the pure half of `make soak-chaos` (test/chaos): the
// nemesis schedule, a pure function of a seed and a duration; the records a
// run writes (the nemesis log, every Alertmanager notification, dbcanary's
// metrics scraped through the run, what the stores still hold at the end);
// and the checker that judges them. Nothing here starts a server or reads a
// clock, so the checker is unit-tested on recorded histories.
package history

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// GroupDaemon is the group of the faults on dbcanary itself (kill -9,
// reloads, its state directory): they affect every target, so no other fault
// overlaps them.
const GroupDaemon = "dbcanary"

// Kind is one entry of the fault catalogue.
type Kind struct {
	Name string
	// Group is what the fault acts on (a store, or GroupDaemon): two faults
	// of one group never overlap, faults of different groups may.
	Group string
	// Target is the dbcanary target whose pages the fault owns; "" owns the
	// pages of every target (a fault on dbcanary itself).
	Target string
	// Min and Max bound how long the fault is held.
	Min, Max time.Duration
	// Pages are the alert names one of which must page; none: no page.
	Pages []string
	// Budget is the longest from injection to the page.
	Budget time.Duration
	// Weight is how often the kind is drawn relative to the others (0 = 1).
	Weight int
	// NotBefore: the kind is drawn only this long into the run or later
	// (a fault whose rules need their long window filled first).
	NotBefore time.Duration
}

// Planned is one fault of a schedule.
type Planned struct {
	Seq    int           `json:"seq"`
	Kind   string        `json:"kind"`
	Group  string        `json:"group"`
	Target string        `json:"target,omitempty"`
	At     time.Duration `json:"at"`  // from the run's start
	For    time.Duration `json:"for"` // how long it is held
	Pages  []string      `json:"pages,omitempty"`
	Budget time.Duration `json:"budget,omitempty"`
}

// End is when the fault is reverted, from the run's start.
func (p Planned) End() time.Duration { return p.At + p.For }

// Plan shapes a schedule.
type Plan struct {
	Warmup time.Duration // no fault before
	Tail   time.Duration // no fault held into the last Tail of the run
	// Separation is the least time between the end of a fault and the next
	// fault of the same group (its late pages stay its own).
	Separation time.Duration
	// GapMin and GapMax bound the quiet gap after a fault ends.
	GapMin, GapMax time.Duration
	// Overlap is the chance (0-1) that the next fault starts while the
	// previous one is held (on another group).
	Overlap float64
}

// Schedule draws the faults of a run of length run from kinds: a pure
// function of seed, run, kinds and plan, so a run replays from its seed.
func Schedule(seed uint64, run time.Duration, kinds []Kind, plan Plan) []Planned {
	rng := rand.New(rand.NewPCG(splitmix(seed), splitmix(seed+1)))
	var out []Planned
	at := plan.Warmup
	for tries := 0; tries < 10000 && at < run-plan.Tail; tries++ {
		k := draw(rng, kinds)
		if at < k.NotBefore {
			continue // too early for this kind: draw again
		}
		d := k.Min + span(rng, k.Max-k.Min)
		if at+d > run-plan.Tail {
			d = run - plan.Tail - at
			if d < k.Min {
				at += time.Minute // nothing of this kind fits here: try later
				continue
			}
		}
		p := Planned{Seq: len(out) + 1, Kind: k.Name, Group: k.Group, Target: k.Target, At: at, For: d, Pages: k.Pages, Budget: k.Budget}
		if !fits(out, p, plan.Separation) {
			at += 15 * time.Second
			continue
		}
		out = append(out, p)
		if k.Group != GroupDaemon && rng.Float64() < plan.Overlap {
			at += span(rng, d/2) + 10*time.Second
		} else {
			at += d + plan.GapMin + span(rng, plan.GapMax-plan.GapMin)
		}
	}
	return out
}

// fits reports whether p can join out: no fault of its group within
// separation, and a daemon fault overlaps nothing (nor anything it).
func fits(out []Planned, p Planned, separation time.Duration) bool {
	for _, o := range out {
		apart := o.End()+separation <= p.At || p.End()+separation <= o.At
		if (o.Group == p.Group || o.Group == GroupDaemon || p.Group == GroupDaemon) && !apart {
			return false
		}
	}
	return true
}

// splitmix scrambles a seed, so that nearby seeds draw unrelated schedules.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func draw(rng *rand.Rand, kinds []Kind) Kind {
	total := 0
	for _, k := range kinds {
		total += max(k.Weight, 1)
	}
	n := rng.IntN(total)
	for _, k := range kinds {
		if n -= max(k.Weight, 1); n < 0 {
			return k
		}
	}
	return kinds[len(kinds)-1]
}

// span is a random duration in [0, d], whole seconds.
func span(rng *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d/time.Second)+1)) * time.Second
}

// Format prints a schedule, one fault a line.
func Format(s []Planned) string {
	var b strings.Builder
	for _, p := range s {
		want := "no page"
		if len(p.Pages) > 0 {
			want = strings.Join(p.Pages, "|") + " within " + p.Budget.String()
		}
		fmt.Fprintf(&b, "%3d  +%-8s %-8s %-22s on %-9s expect %s\n", p.Seq, p.At, p.For, p.Kind, cmpOr(p.Target, "all"), want)
	}
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Validate names what is wrong with a catalogue.
func Validate(kinds []Kind) error {
	var names []string
	for _, k := range kinds {
		switch {
		case k.Name == "" || k.Group == "":
			return fmt.Errorf("fault kind %q: name and group are required", k.Name)
		case slices.Contains(names, k.Name):
			return fmt.Errorf("fault kind %q: listed twice", k.Name)
		case k.Min <= 0 || k.Max < k.Min:
			return fmt.Errorf("fault kind %q: want 0 < min <= max, got %s, %s", k.Name, k.Min, k.Max)
		case len(k.Pages) > 0 && k.Min < k.Budget:
			return fmt.Errorf("fault kind %q: held %s, shorter than its page budget %s", k.Name, k.Min, k.Budget)
		}
		names = append(names, k.Name)
	}
	return nil
}
