package bench

import (
	"strconv"
	"time"

	"github.com/dbcanary/dbcanary/internal/engine"
)

// Concurrency is the concurrency a stage (or one op of it) actually ran at,
// beside the limit it was given (Mongoose's "actual concurrency"): the mean
// in flight by Little's law (the rate of ops that were in flight times their
// mean time in flight, from the request leaving to its end: what the store
// saw), and the in-flight count itself, counted at every op's start and end
// (from a worker taking the op to its end, so client-side work counts too):
// its exact time average over the stage and its maximum.
type Concurrency struct {
	// Limit is the configured bound: the stage's workers (summed over drivers).
	Limit int `json:"limit"`
	// Rate is the completions per second of ops that were in flight (failed
	// ones too; not the ops that never started: cause backlog).
	Rate float64 `json:"rate_ops_per_s"`
	// MeanTime is their mean time in flight in ms; Little = Rate × MeanTime.
	MeanTime float64 `json:"mean_time_in_flight_ms"`
	Little   float64 `json:"little_mean_in_flight"`
	// BusySeconds is the sum of every op's time in flight (Little's numerator).
	BusySeconds float64 `json:"busy_seconds"`
	// CountedMean is the in-flight count's time average over the stage;
	// CountedMax its highest value.
	CountedMean float64 `json:"counted_mean_in_flight"`
	CountedMax  int64   `json:"counted_max_in_flight"`
	// MaxIsSum (merged reports): CountedMax is the sum of the drivers'
	// maxima, an upper bound of the total's, as the drivers' peaks need not coincide.
	MaxIsSum bool `json:"counted_max_is_sum_of_drivers,omitempty"`
}

// counted is an in-flight count over a stage: its time average and maximum.
type counted struct {
	mean float64
	max  int64
}

// inFlighter reads the in-flight counts of a target's scheduled ops (engine.Load).
type inFlighter interface {
	InFlight(now time.Time) (all engine.Flight, ops map[string]engine.Flight)
}

// flightWindow holds a stage's in-flight counts from its start.
type flightWindow struct {
	src   inFlighter
	start time.Time
	all   engine.Flight
	ops   map[string]engine.Flight
}

// openFlightWindow starts counting at now: the peaks start over.
func openFlightWindow(src inFlighter, now time.Time) *flightWindow {
	w := &flightWindow{src: src, start: now}
	w.all, w.ops = src.InFlight(now)
	return w
}

// close ends the window at now and returns the stage's counts and each op's.
func (w *flightWindow) close(now time.Time) (all counted, ops map[string]counted) {
	secs := now.Sub(w.start).Seconds()
	of := func(from, to engine.Flight) counted {
		c := counted{max: to.Peak}
		if secs > 0 {
			c.mean = (to.Area - from.Area).Seconds() / secs
		}
		return c
	}
	a, o := w.src.InFlight(now)
	ops = map[string]counted{}
	for name, f := range o {
		ops[name] = of(w.ops[name], f)
	}
	return of(w.all, a), ops
}

// concurrencyOf computes the figures of n completions that spent busy in
// flight in total over secs seconds, and the counted in-flight figures c.
func concurrencyOf(limit int, n uint64, busy time.Duration, secs float64, c counted) *Concurrency {
	out := &Concurrency{Limit: limit, BusySeconds: busy.Seconds(), CountedMean: c.mean, CountedMax: c.max}
	if secs > 0 {
		out.Rate = float64(n) / secs
		out.Little = busy.Seconds() / secs
	}
	if n > 0 {
		out.MeanTime = busy.Seconds() * 1000 / float64(n)
	}
	return out
}

// sumConcurrency adds the drivers' figures of one stage or op: the limits,
// rates and means add up (each driver keeps its own in flight); the maxima
// add up to an upper bound.
func sumConcurrency(cs []*Concurrency) *Concurrency {
	var out *Concurrency
	for _, c := range cs {
		if c == nil {
			continue
		}
		if out == nil {
			out = &Concurrency{MaxIsSum: len(cs) > 1}
		}
		out.Limit += c.Limit
		out.Rate += c.Rate
		out.Little += c.Little
		out.BusySeconds += c.BusySeconds
		out.CountedMean += c.CountedMean
		out.CountedMax += c.CountedMax
	}
	if out != nil && out.Rate > 0 {
		out.MeanTime = out.Little / out.Rate * 1000
	}
	return out
}

// concurrencyTable is every report's actual concurrency: per measured stage
// (and per op when it has several), the limit, the mean in flight by
// Little's law and the counted mean and max.
func concurrencyTable(r *Report) Table {
	t := Table{ID: "concurrency", Title: "Actual concurrency: ops in flight against the configured limit",
		Header:     []string{"Task", "Limit", "Rate (ops/s)", "Mean time in flight (ms)", "Mean in flight (Little)", "Counted mean", "Counted max"},
		RightAlign: []bool{false, true, true, true, true, true, true}}
	row := func(task string, c *Concurrency) {
		mx := strconv.FormatInt(c.CountedMax, 10)
		if c.MaxIsSum {
			mx = "≤ " + mx
		}
		t.Rows = append(t.Rows, []string{task, strconv.Itoa(c.Limit), num(c.Rate), num(c.MeanTime), num(c.Little), num(c.CountedMean), mx})
	}
	for _, s := range measured(r) {
		if s.Concurrency != nil {
			row(s.Name, s.Concurrency)
		}
		for i := range s.Ops {
			if o := &s.Ops[i]; o.Concurrency != nil && len(s.Ops) > 1 {
				row(task(s, o.Op), o.Concurrency)
			}
		}
	}
	t.Notes = []string{"Little's law: mean in flight = rate × mean time in flight, from each request leaving to its end (what the store saw). Counted: the ops between a worker taking them and their end (client-side work included), counted at every start and end: the exact time average over the stage and the highest count. The limit is the stage's workers."}
	if len(r.Drivers) > 0 {
		t.Notes = append(t.Notes, "Merged: limits, rates and means are the drivers' summed; a counted max marked ≤ is the sum of the drivers' maxima, an upper bound of the total's (their peaks need not coincide).")
	}
	return t
}
