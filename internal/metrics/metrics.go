// Package metrics defines the op, target and reload metrics dbcanary exports
// (the durability ledger's own live in probes.LedgerStore). Label sets are small
// and fixed (target, backend, op, result, cause, phase, direction); no label
// ever carries an unbounded value such as an error string, key or object name.
package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"

	"github.com/dbcanary/dbcanary/probes"
)

const namespace = "dbcanary"

// LatencyBuckets are the classic bucket bounds, in seconds: a roughly
// 1-2.5-5 ladder and the `buckets:` of the shipped baseline file
// (baselines/james-reference.yaml, compiled in), the reference figures that
// alerts compare against, so that histogram_quantile is exact at a
// threshold rather than interpolated across a wide bucket.
//
// The alert generator (internal/generate) snaps every threshold onto one of
// these bounds and its tests fail if one is missing. Every op histogram has
// them all with --metrics.histograms=full; the default, Compact, keeps only
// BoardBuckets and the op's ThresholdBounds (bounds.go).
var LatencyBuckets = withBuckets([]float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10, 30, 60,
}, shipped.Buckets)

// withBuckets is the sorted union of a ladder and more bounds.
func withBuckets(ladder, more []float64) []float64 {
	b := append(slices.Clone(ladder), more...)
	slices.Sort(b)
	return slices.Compact(b)
}

// Result label values.
const (
	ResultOK    = "ok"
	ResultError = "error"
)

// Metrics holds every collector; one instance per registry.
type Metrics struct {
	Latency       *histFamily
	ServiceTime   *histFamily
	Phase         *histFamily
	Failures      *prometheus.CounterVec
	Up            *prometheus.GaugeVec
	Misconfigured *prometheus.GaugeVec
	ExpectedRate  *prometheus.GaugeVec
	LastSuccess   *prometheus.GaugeVec
	Bytes         *prometheus.CounterVec
	InFlight      *prometheus.GaugeVec
	CertExpiry    *prometheus.GaugeVec

	ReloadSuccess   prometheus.Gauge
	ReloadTimestamp prometheus.Gauge
	Targets         prometheus.Gauge

	opt Options
}

func histogramOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Namespace: namespace, Name: name, Help: help,
		// Native histogram: ~10 % relative resolution, bounded bucket count.
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

// NewWith creates the metrics with opt's histogram layout (the zero Options:
// the shipped Compact layout) and registers them, with the Go and process
// collectors and dbcanary_build_info, on reg.
func NewWith(reg prometheus.Registerer, opt Options) *Metrics {
	m := &Metrics{
		opt: opt,
		Latency: newHistFamily(histogramOpts("op_latency_seconds",
			"Time from an op's intended start (its slot in the open-loop schedule) to its end: includes any wait for a free in-flight slot, so stalls are not hidden."),
			[]string{"target", "backend", "op", "result"}),
		ServiceTime: newHistFamily(histogramOpts("op_service_time_seconds",
			"Time from the moment an op's request was actually sent to its end."),
			[]string{"target", "backend", "op", "result"}),
		Phase: newHistFamily(histogramOpts("op_phase_seconds",
			"Named parts of an op (S3 first_byte/last_byte, RabbitMQ end_to_end, ...), successful ops only."),
			[]string{"target", "backend", "op", "phase"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "op_failures_total",
			Help: "Failed ops by cause (timeout, refused, dns, tls, auth, setup, not_found, mismatch, lost, server, backlog, other)."},
			[]string{"target", "backend", "op", "cause"}),
		Up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "target_up",
			Help: "1 if the latest run of every op of the target reached the store (even if it then found bad data), 0 if any op's latest run could not (timeout, refused, dns, tls, auth, setup, server) or the canary namespace could not be prepared."},
			[]string{"target", "backend"}),
		Misconfigured: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "target_misconfigured",
			Help: "1 if the target is down because of a setup mistake: credentials rejected (auth) or a missing bucket, index, keyspace, grant or permission (setup)."},
			[]string{"target", "backend"}),
		ExpectedRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "op_expected_rate",
			Help: "Samples per second the op is configured to produce: its rate, or for an event-driven op (consume) the rate of the scheduled ops that feed it. Alerts size their windows and error budgets with it."},
			[]string{"target", "backend", "op"}),
		LastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "last_success_timestamp_seconds",
			Help: "Unix time of the op's last success."},
			[]string{"target", "backend", "op"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "op_bytes_total",
			Help: "Payload bytes moved by ops, direction=sent|received."},
			[]string{"target", "backend", "op", "direction"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "op_in_flight",
			Help: "Ops running now against the target (bounded by max_in_flight)."},
			[]string{"target", "backend"}),
		CertExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "tls_earliest_cert_expiry_timestamp_seconds",
			Help: "Unix time at which the first of the certificates the target's store presented over TLS expires (leaf or chain, over every node certificate seen); absent for plaintext targets."},
			[]string{"target", "backend"}),
		ReloadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "config_last_reload_successful",
			Help: "Whether the last configuration load or reload succeeded."}),
		ReloadTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration load or reload."}),
		Targets: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "targets",
			Help: "Targets this instance probes."}),
	}
	reg.MustRegister(m.Latency, m.ServiceTime, m.Phase, m.Failures, m.Up, m.Misconfigured, m.ExpectedRate, m.LastSuccess, m.Bytes, m.InFlight, m.CertExpiry,
		m.ReloadSuccess, m.ReloadTimestamp, m.Targets,
		versioncollector.NewCollector(namespace),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// DeleteTarget removes every series of a target (when it leaves the config).
func (m *Metrics) DeleteTarget(target string) {
	l := prometheus.Labels{"target": target}
	m.Latency.DeletePartialMatch(l)
	m.ServiceTime.DeletePartialMatch(l)
	m.Phase.DeletePartialMatch(l)
	m.Failures.DeletePartialMatch(l)
	m.Up.DeletePartialMatch(l)
	m.Misconfigured.DeletePartialMatch(l)
	m.ExpectedRate.DeletePartialMatch(l)
	m.LastSuccess.DeletePartialMatch(l)
	m.Bytes.DeletePartialMatch(l)
	m.InFlight.DeletePartialMatch(l)
	m.CertExpiry.DeletePartialMatch(l)
}

// OpObservers are an op's series, resolved once, so the hot path does no
// label lookup. Series a healthy op never touches (error latency and service
// time, the failure causes no alert selects by name) are created on first
// use, not at zero up front: that
// keeps the series count of a fleet of healthy canaries small (docs/sizing.md).
type OpObservers struct {
	LatencyOK, LatencyErr prometheus.Observer
	ServiceOK, ServiceErr prometheus.Observer
	LastSuccess           prometheus.Gauge
	BytesSent             prometheus.Counter
	BytesReceived         prometheus.Counter
	Phases                map[string]prometheus.Observer // nil for an op without phases

	// failures are the op's failure counters in the order of probes.Causes:
	// one slice per op rather than a map and a label slice per cause (a
	// fleet of 1,000 targets holds 13 per op).
	failures []lazyCounter
	labels   opLabels
}

// opLabels are an op's label values, shared by its lazily created series.
type opLabels struct{ target, backend, op string }

// Failure is the failure counter of cause c (CauseOther's for a cause
// probes.Causes does not list).
func (o *OpObservers) Failure(c probes.Cause) prometheus.Counter {
	i := slices.Index(probes.Causes, c)
	if i < 0 {
		i = slices.Index(probes.Causes, probes.CauseOther)
	}
	return &o.failures[i]
}

// EagerCauses are the failure causes created at zero with the op: the ones an
// alert selects by name and must see from their first occurrence (a counter
// that appears at 1 has no increase() until it moves again). The others are
// created on first use, so an op's first failure of such a cause is missing
// from increase() and rate(); the alerts that read them (error ratio, error
// budget) need many failures anyway. Backlog also keeps the error-budget
// ratio's numerator present (at 0) for a healthy target.
var EagerCauses = []probes.Cause{probes.CauseNotFound, probes.CauseMismatch, probes.CauseLost, probes.CauseBacklog}

// ForOp resolves an op's series: the ok latency, service time and phases,
// the eager causes, last success and bytes are created at zero now, the
// error histograms and the other causes on first use.
func (m *Metrics) ForOp(target, backend, op string, phases []string) *OpObservers {
	o := &OpObservers{
		failures: make([]lazyCounter, len(probes.Causes)),
		labels:   opLabels{target, backend, op},
	}
	if len(phases) > 0 {
		o.Phases = make(map[string]prometheus.Observer, len(phases))
	}
	lat := m.Latency.vec(m.opt.bounds(backend, op, ""))
	svc := m.ServiceTime.vec(m.opt.serviceBounds())
	full := m.opt.Histograms == Full
	o.LatencyOK = lat.WithLabelValues(target, backend, op, ResultOK)
	latErr := &lazyObserver{vec: lat, op: &o.labels}
	o.ServiceOK = svc.WithLabelValues(target, backend, op, ResultOK)
	svcErr := &lazyObserver{vec: svc, op: &o.labels}
	o.LatencyErr, o.ServiceErr = latErr, svcErr
	for i, c := range probes.Causes {
		lc := &o.failures[i]
		lc.vec, lc.op, lc.cause = m.Failures, &o.labels, c
		if full || slices.Contains(EagerCauses, c) {
			lc.get()
		}
	}
	o.LastSuccess = m.LastSuccess.WithLabelValues(target, backend, op)
	// Both directions at zero up front: the boards' bytes panels read
	// rate() of them from the op's start.
	o.BytesSent = m.Bytes.WithLabelValues(target, backend, op, "sent")
	o.BytesReceived = m.Bytes.WithLabelValues(target, backend, op, "received")
	if full { // every series at zero up front, as before the series budget
		latErr.get()
		svcErr.get()
	}
	for _, p := range phases {
		o.Phases[p] = m.Phase.vec(m.opt.bounds(backend, op, p)).WithLabelValues(target, backend, op, p)
	}
	return o
}

// lazyObserver creates its histogram series (result="error") on the first observation.
type lazyObserver struct {
	once sync.Once
	vec  *prometheus.HistogramVec
	op   *opLabels
	o    prometheus.Observer
}

func (l *lazyObserver) get() prometheus.Observer {
	l.once.Do(func() { l.o = l.vec.WithLabelValues(l.op.target, l.op.backend, l.op.op, ResultError) })
	return l.o
}

func (l *lazyObserver) Observe(v float64) { l.get().Observe(v) }

// lazyCounter creates its failure counter series on first use.
type lazyCounter struct {
	once  sync.Once
	vec   *prometheus.CounterVec
	op    *opLabels
	cause probes.Cause
	c     prometheus.Counter
}

func (l *lazyCounter) get() prometheus.Counter {
	l.once.Do(func() { l.c = l.vec.WithLabelValues(l.op.target, l.op.backend, l.op.op, string(l.cause)) })
	return l.c
}

func (l *lazyCounter) Inc()                                { l.get().Inc() }
func (l *lazyCounter) Add(v float64)                       { l.get().Add(v) }
func (l *lazyCounter) Desc() *prometheus.Desc              { return l.get().Desc() }
func (l *lazyCounter) Write(out *dto.Metric) error         { return l.get().Write(out) }
func (l *lazyCounter) Describe(ch chan<- *prometheus.Desc) { l.get().Describe(ch) }
func (l *lazyCounter) Collect(ch chan<- prometheus.Metric) { l.get().Collect(ch) }
