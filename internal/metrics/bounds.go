package metrics

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbcanary/dbcanary/baselines"
	"github.com/dbcanary/dbcanary/internal/baseline"
)

// Histograms selects the classic buckets the op histograms export.
type Histograms int

const (
	// Compact, the default, keeps a fleet of canaries cheap (docs/sizing.md):
	// op latency and phase histograms get classic buckets only at
	// BoardBuckets and at their op's alert thresholds (ThresholdBounds), and
	// service time gets none (native buckets, plus _sum and _count); every
	// op histogram keeps its native buckets.
	Compact Histograms = iota
	// Full exports every op histogram with every bound of LatencyBuckets and
	// creates every series of an op at zero up front, as dbcanary did before
	// the series budget (--metrics.histograms=full).
	Full
)

// ParseHistograms reads the --metrics.histograms flag value.
func ParseHistograms(s string) (Histograms, error) {
	switch s {
	case "compact", "":
		return Compact, nil
	case "full":
		return Full, nil
	}
	return Compact, fmt.Errorf("unknown histograms setting %q (want compact or full)", s)
}

func (h Histograms) String() string {
	if h == Full {
		return "full"
	}
	return "compact"
}

// Options tune the metrics.
type Options struct {
	Histograms Histograms
}

// BoardBuckets are the classic bounds every op latency and phase histogram
// has in Compact mode, one a decade, so that a Prometheus that ingests
// classic histograms only still draws the boards' p50/p99 to the right order
// of magnitude (a Prometheus with native histograms gets ~10 % resolution).
// The top one must stay above every threshold below the default timeout: a
// threshold on the highest finite bound could never be exceeded.
var BoardBuckets = []float64{0.005, 0.05, 0.5, 5}

// ThresholdBounds are the classic bounds the shipped alert rules select with
// `le` (alerts/thresholds.md), by "backend/op" or "backend/op/phase": the
// warning and critical thresholds of the shipped baseline file
// (baselines/james-reference.yaml, compiled in), snapped onto LatencyBuckets
// as the rule generator snaps them, including those left out at the default
// timeout (a config with a longer timeout and policy.op_timeouts turns them
// on). A backend's figures in that file are all it takes; a baseline of your
// own may need Full (see docs/sizing.md).
func ThresholdBounds() map[string][]float64 { return thresholdBounds() }

var thresholdBounds = sync.OnceValue(func() map[string][]float64 { return thresholdBoundsOf(shipped) })

// shipped is the shipped baseline file; a broken one fails every test and
// the daemon's start.
var shipped = func() *baseline.File {
	b, err := baseline.Parse(baselines.Reference)
	if err != nil {
		panic("metrics: the shipped baseline file: " + err.Error())
	}
	return b
}()

// thresholdBoundsOf snaps every alert figure's warning and critical
// threshold onto LatencyBuckets, by "backend/op[/phase]".
func thresholdBoundsOf(b *baseline.File) map[string][]float64 {
	out := map[string][]float64{}
	for _, f := range b.Figures {
		if f.Use != baseline.UseAlert {
			continue
		}
		fac := b.EffectiveFactors(f)
		for _, op := range f.Ops {
			key := strings.TrimSuffix(f.Backend+"/"+op+"/"+f.Phase, "/")
			for _, factor := range []float64{fac.Warning, fac.Critical} {
				if bound, ok := Snap(f.Seconds()*factor, b.SnapTolerance, LatencyBuckets); ok && !slices.Contains(out[key], bound) {
					out[key] = append(out[key], bound)
				}
			}
		}
	}
	for _, v := range out {
		sort.Float64s(v)
	}
	return out
}

// Snap returns the nearest bound at most tol below v, else the smallest bound
// at or above v; ok is false when v is beyond the highest finite bound but one
// (histogram_quantile never returns more than the highest finite bound, so a
// threshold there could never be exceeded).
func Snap(v, tol float64, bounds []float64) (float64, bool) {
	b := append([]float64(nil), bounds...)
	sort.Float64s(b)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] <= v && b[i] >= v*(1-tol) {
			return b[i], i < len(b)-1
		}
	}
	for i, x := range b {
		if x >= v {
			return x, i < len(b)-1
		}
	}
	return math.Inf(1), false
}

// Bounds are the classic bounds of an op's latency histogram (phase "") or
// of one of its phases: in Full mode LatencyBuckets; in Compact mode
// BoardBuckets, the op's ThresholdBounds and, when its highest threshold is
// at or above the top board bound, the next bound of LatencyBuckets above it
// (so that a p99 can exceed that threshold).
func (o Options) Bounds(backend, op, phase string) []float64 {
	if o.Histograms == Full {
		return LatencyBuckets
	}
	key := backend + "/" + op
	if phase != "" {
		key += "/" + phase
	}
	b := append(slices.Clone(BoardBuckets), thresholdBounds()[key]...)
	sort.Float64s(b)
	b = slices.Compact(b)
	if top := b[len(b)-1]; !slices.Contains(BoardBuckets, top) {
		if next := nextBound(top); !math.IsInf(next, 1) {
			b = append(b, next)
		}
	}
	return b
}

func (o Options) bounds(backend, op, phase string) []float64 { return o.Bounds(backend, op, phase) }

// serviceBounds are service time's classic bounds: none in Compact mode (no
// rule or board reads service time by bucket).
func (o Options) serviceBounds() []float64 {
	if o.Histograms == Full {
		return LatencyBuckets
	}
	return nil
}

// nextBound is the smallest bound of LatencyBuckets above v (+Inf past the last).
func nextBound(v float64) float64 {
	for _, x := range LatencyBuckets {
		if x > v {
			return x
		}
	}
	return math.Inf(1)
}

// histFamily is one histogram metric whose series may have different classic
// bounds (by op): one HistogramVec per layout, exposed as one family.
type histFamily struct {
	opts   prometheus.HistogramOpts
	labels []string
	desc   *prometheus.Desc

	mu   sync.Mutex
	vecs map[string]*prometheus.HistogramVec
	all  []*prometheus.HistogramVec
}

func newHistFamily(opts prometheus.HistogramOpts, labels []string) *histFamily {
	return &histFamily{opts: opts, labels: labels, vecs: map[string]*prometheus.HistogramVec{},
		desc: prometheus.NewDesc(prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name), opts.Help, labels, nil)}
}

// vec is the family's HistogramVec with these classic bounds (nil: none,
// native buckets only).
func (f *histFamily) vec(bounds []float64) *prometheus.HistogramVec {
	key := fmt.Sprint(bounds)
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.vecs[key]; ok {
		return v
	}
	o := f.opts
	o.Buckets = slices.Clone(bounds)
	if o.Buckets == nil {
		o.Buckets = []float64{}
	}
	v := prometheus.NewHistogramVec(o, f.labels)
	f.vecs[key] = v
	f.all = append(f.all, v)
	return v
}

func (f *histFamily) layouts() []*prometheus.HistogramVec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all)
}

// Describe implements prometheus.Collector.
func (f *histFamily) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

// Collect implements prometheus.Collector.
func (f *histFamily) Collect(ch chan<- prometheus.Metric) {
	for _, v := range f.layouts() {
		v.Collect(ch)
	}
}

// DeletePartialMatch deletes the series matching labels in every layout.
func (f *histFamily) DeletePartialMatch(labels prometheus.Labels) int {
	n := 0
	for _, v := range f.layouts() {
		n += v.DeletePartialMatch(labels)
	}
	return n
}
