package bench

import (
	"fmt"
	"strconv"
	"time"
)

// sampleEvery is how often a stage samples its ops' in-flight counts.
const sampleEvery = 10 * time.Millisecond

// Concurrency is the concurrency a stage (or one op of it) actually ran at,
// beside the limit it was given (Mongoose's "actual concurrency"): the mean
// in flight by Little's law (the rate of ops that were in flight times their
// mean time in flight, from the request leaving to its end: what the store
// saw), and the in-flight count sampled every SampleMS (from a worker taking
// the op to its end, so client-side work counts too).
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
	SampledMean float64 `json:"sampled_mean_in_flight"`
	SampledMax  int64   `json:"sampled_max_in_flight"`
	Samples     int64   `json:"samples"`
	SampleMS    float64 `json:"sample_interval_ms"`
	// MaxIsSum (merged reports): SampledMax is the sum of the drivers'
	// maxima, an upper bound of the total's, as the drivers' peaks need not coincide.
	MaxIsSum bool `json:"sampled_max_is_sum_of_drivers,omitempty"`
}

// inFlightGauge accumulates samples of an in-flight count.
type inFlightGauge struct {
	sum, max, n int64
}

func (g *inFlightGauge) add(v int64) {
	g.sum += v
	g.max = max(g.max, v)
	g.n++
}

// inFlighter reports each scheduled op's runs in flight now (engine.Load).
type inFlighter interface {
	InFlight(f func(op string, n int64))
}

// sampler samples the in-flight counts of src every interval until stopped;
// it owns the gauges until stop returns.
type sampler struct {
	ops   map[string]*inFlightGauge
	total inFlightGauge
}

func (s *sampler) sample(src inFlighter) {
	var total int64
	src.InFlight(func(op string, n int64) {
		g := s.ops[op]
		if g == nil {
			g = &inFlightGauge{}
			s.ops[op] = g
		}
		g.add(n)
		total += n
	})
	s.total.add(total)
}

// startSampler samples src every interval on a goroutine of its own; stop
// ends it and returns the gauges.
func startSampler(src inFlighter, interval time.Duration) (stop func() *sampler) {
	s := &sampler{ops: map[string]*inFlightGauge{}}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.sample(src)
			}
		}
	}()
	return func() *sampler { close(done); <-finished; return s }
}

// concurrencyOf computes the figures of n completions that spent busy in
// flight in total over secs seconds, and the sampled gauge g.
func concurrencyOf(limit int, n uint64, busy time.Duration, secs float64, g inFlightGauge) *Concurrency {
	c := &Concurrency{Limit: limit, BusySeconds: busy.Seconds(), SampledMax: g.max, Samples: g.n, SampleMS: ms(sampleEvery)}
	if secs > 0 {
		c.Rate = float64(n) / secs
		c.Little = busy.Seconds() / secs
	}
	if n > 0 {
		c.MeanTime = busy.Seconds() * 1000 / float64(n)
	}
	if g.n > 0 {
		c.SampledMean = float64(g.sum) / float64(g.n)
	}
	return c
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
			out = &Concurrency{SampleMS: c.SampleMS, MaxIsSum: len(cs) > 1}
		}
		out.Limit += c.Limit
		out.Rate += c.Rate
		out.Little += c.Little
		out.BusySeconds += c.BusySeconds
		out.SampledMean += c.SampledMean
		out.SampledMax += c.SampledMax
		out.Samples += c.Samples
	}
	if out != nil && out.Rate > 0 {
		out.MeanTime = out.Little / out.Rate * 1000
	}
	return out
}

// concurrencyTable is every report's actual concurrency: per measured stage
// (and per op when it has several), the limit, the mean in flight by
// Little's law and the sampled mean and max.
func concurrencyTable(r *Report) Table {
	t := Table{ID: "concurrency", Title: "Actual concurrency: ops in flight against the configured limit",
		Header:     []string{"Task", "Limit", "Rate (ops/s)", "Mean time in flight (ms)", "Mean in flight (Little)", "Sampled mean", "Sampled max", "Samples"},
		RightAlign: []bool{false, true, true, true, true, true, true, true}}
	row := func(task string, c *Concurrency) {
		mx := strconv.FormatInt(c.SampledMax, 10)
		if c.MaxIsSum {
			mx = "≤ " + mx
		}
		t.Rows = append(t.Rows, []string{task, strconv.Itoa(c.Limit), num(c.Rate), num(c.MeanTime), num(c.Little), num(c.SampledMean), mx, strconv.FormatInt(c.Samples, 10)})
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
	t.Notes = []string{fmt.Sprintf("Little's law: mean in flight = rate × mean time in flight, from each request leaving to its end (what the store saw). Sampled: the ops between a worker taking them and their end, counted every %s (client-side work included). The limit is the stage's workers.", sampleEvery)}
	if len(r.Drivers) > 0 {
		t.Notes = append(t.Notes, "Merged: limits, rates and means are the drivers' summed; a sampled max marked ≤ is the sum of the drivers' maxima, an upper bound of the total's (their peaks need not coincide).")
	}
	return t
}
