package bench

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/hist"
	"github.com/dbcanary/dbcanary/probes"
)

// maxIntervals bounds a stage's time series; later samples join the last interval.
const maxIntervals = 3600

// opRecord is everything measured of one op in one stage.
type opRecord struct {
	mu                  sync.Mutex
	latency, service    *hist.Histogram
	phases              map[string]*hist.Histogram
	ok, failed          uint64
	causes              map[probes.Cause]uint64
	bytesSent, bytesRcv int64
	series              []*interval
	// async: an event-driven op (no worker runs it, no in-flight count).
	async bool
	// ran counts the ops that ran (every one but backlog failures), busy
	// their time in flight (request sent to end): Little's law's inputs.
	ran  uint64
	busy time.Duration
}

// interval is one step of the plots: completions and their latencies.
type interval struct {
	ok, failed uint64
	latency    *hist.Histogram
}

// stageRecord collects one stage's samples; safe for concurrent use.
type stageRecord struct {
	spec  stageSpec
	start time.Time
	step  time.Duration

	mu  sync.Mutex
	ops map[string]*opRecord
	// Every sample of the stage, precise, for the all-ops figures (YCSB's
	// overall percentiles); the scheduled ones, coarse, for the progress line.
	all, overall *hist.Histogram
	n, failed    atomic.Uint64

	result engine.StageResult
}

func newStageRecord(spec stageSpec, start time.Time) *stageRecord {
	step := time.Second
	if spec.Duration > 240*time.Second {
		step = (spec.Duration/240 + time.Second - 1).Truncate(time.Second)
	}
	return &stageRecord{spec: spec, start: start, step: step, ops: map[string]*opRecord{}, all: hist.New(hist.Coarse), overall: hist.New(hist.Precise)}
}

// record is the stage's engine.SampleFunc.
func (s *stageRecord) record(smp engine.Sample) {
	lat := smp.End.Sub(smp.Intended)
	s.mu.Lock()
	o := s.ops[smp.Op]
	if o == nil {
		o = &opRecord{latency: hist.New(hist.Precise), service: hist.New(hist.Precise), phases: map[string]*hist.Histogram{}, causes: map[probes.Cause]uint64{}}
		s.ops[smp.Op] = o
	}
	s.overall.Record(lat)
	if !smp.Async {
		s.all.Record(lat)
	}
	s.mu.Unlock()
	if !smp.Async {
		s.n.Add(1) // the progress line counts the ops the stage runs
	}
	ran := !smp.Async && probes.CauseOf(smp.Err) != probes.CauseBacklog

	i := min(max(int(smp.End.Sub(s.start)/s.step), 0), maxIntervals-1)
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.series) <= i {
		o.series = append(o.series, &interval{latency: hist.New(hist.Coarse)})
	}
	iv := o.series[i]
	iv.latency.Record(lat)
	o.latency.Record(lat)
	o.async = smp.Async
	if ran {
		o.ran++
		o.busy += smp.End.Sub(smp.Sent)
	}
	o.bytesSent += smp.BytesSent
	o.bytesRcv += smp.BytesReceived
	if smp.Err != nil {
		s.failed.Add(1) // failures of every kind, event-driven ones too
		o.failed++
		iv.failed++
		o.causes[probes.CauseOf(smp.Err)]++
		return
	}
	o.ok++
	iv.ok++
	o.service.Record(smp.End.Sub(smp.Sent))
	for _, p := range smp.Phases {
		h := o.phases[p.Name]
		if h == nil {
			h = hist.New(hist.Precise)
			o.phases[p.Name] = h
		}
		h.Record(p.Duration)
	}
}

// snapshot is the progress line's view: ops so far, failures, p50 and p99.
func (s *stageRecord) snapshot() (n, failed uint64, p50, p99 time.Duration) {
	s.mu.Lock()
	p50, p99 = s.all.Quantile(0.5), s.all.Quantile(0.99)
	s.mu.Unlock()
	return s.n.Load(), s.failed.Load(), p50, p99
}

// report turns the stage into its report section; all and ops are its
// counted in-flight figures, the stage's and each op's.
func (s *stageRecord) report(all counted, ops map[string]counted) StageReport {
	secs := s.result.End.Sub(s.result.Start).Seconds()
	sr := StageReport{Name: s.spec.Name, Group: s.spec.Group, Setup: s.spec.Setup, Workers: s.spec.Workers, Rate: s.spec.Rate,
		Mode: s.spec.mode(), Seconds: secs, Issued: s.result.Issued, Step: s.step.Seconds(), Started: s.result.Start, Ended: s.result.End}
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.ops))
	sr.Overall, sr.OverallHist = summarize(s.overall), s.overall.Snapshot()
	s.mu.Unlock()
	var ran uint64
	var busy time.Duration
	for _, name := range names {
		o := s.ops[name]
		o.mu.Lock()
		r := o.report(name, secs, s.step.Seconds())
		if !o.async {
			r.Concurrency = concurrencyOf(s.spec.Workers, o.ran, o.busy, secs, ops[name])
			ran, busy = ran+o.ran, busy+o.busy
		}
		o.mu.Unlock()
		sr.Ops = append(sr.Ops, r)
		if secs > 0 {
			sr.Throughput += float64(r.OK) / secs
		}
	}
	sr.Concurrency = concurrencyOf(s.spec.Workers, ran, busy, secs, all)
	return sr
}

// report is the op's section of a stage of secs seconds plotted in steps
// of step seconds; the caller holds o.mu.
func (o *opRecord) report(name string, secs, step float64) OpReport {
	r := OpReport{Op: name, OK: o.ok, Failed: o.failed, BytesSent: o.bytesSent, BytesReceived: o.bytesRcv,
		Latency: summarize(o.latency), Service: summarize(o.service),
		Histograms: OpHistograms{Latency: o.latency.Snapshot(), Service: o.service.Snapshot()}}
	r.Count = o.ok + o.failed
	r.rates(secs)
	if len(o.causes) > 0 {
		r.Causes = map[string]uint64{}
		for c, n := range o.causes {
			r.Causes[string(c)] = n
		}
	}
	if len(o.phases) > 0 {
		r.Phases = map[string]Summary{}
		r.Histograms.Phases = map[string]hist.Snapshot{}
		for p, h := range o.phases {
			r.Phases[p] = summarize(h)
			r.Histograms.Phases[p] = h.Snapshot()
		}
	}
	for i, iv := range o.series {
		r.Series = append(r.Series, pointOf(float64(i+1)*step, step, iv.ok, iv.failed, iv.latency))
	}
	return r
}

// rates sets the op's throughput, bandwidth and error rate over secs.
func (r *OpReport) rates(secs float64) {
	if secs > 0 {
		r.Throughput = float64(r.OK) / secs
		r.MiBps = float64(max(r.BytesReceived, r.BytesSent)) / secs / (1 << 20)
	}
	if r.Count > 0 {
		r.ErrorRate = float64(r.Failed) / float64(r.Count)
	}
}

// pointOf is the plot interval ending at t, of step seconds.
func pointOf(t, step float64, ok, failed uint64, lat *hist.Histogram) Point {
	snap := lat.Snapshot()
	return Point{T: t, OK: ok, Failed: failed, OpsPerSec: float64(ok) / step, ErrorsPerSec: float64(failed) / step,
		P50: ms(lat.Quantile(0.5)), P99: ms(lat.Quantile(0.99)), Max: ms(lat.Max()), Latency: &snap}
}

func summarize(h *hist.Histogram) Summary {
	return Summary{Count: h.Count(), Min: ms(h.Min()), Mean: ms(h.Mean()), P25: ms(h.Quantile(0.25)), P50: ms(h.Quantile(0.5)),
		P75: ms(h.Quantile(0.75)), P90: ms(h.Quantile(0.9)), P95: ms(h.Quantile(0.95)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max())}
}

// ms is a duration in milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return float64(d.Round(time.Microsecond)) / 1e6 }
