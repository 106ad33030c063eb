// Package bench runs the reference benchmark methodologies (cassandra-stress
// mixed_workload, YCSB workloada, opensearch-benchmark pmc, rabbitmq-perf-test,
// s3-benchmark) with dbcanary's own probes, so every read is verified, and
// reports the figures the reference documents print, each beside its
// documented reference: text tables, JSON and a self-contained HTML page.
// Each profile is declared by its backend's record (probes.Backend.Bench);
// this package knows the tables' layouts, never a backend.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/probes"
)

// Options of one bench run.
type Options struct {
	Profile *Profile
	Params  Params
	Config  *config.Config
	// Target names the config's target; empty: the first of the profile's backend.
	Target string
	// Yes allows targets that are not on this machine's loopback interface.
	Yes bool
	// Baseline holds the reference figures (nil: no comparison).
	Baseline *baseline.File
	Logger   *slog.Logger
	// Progress shows a live line (force: even if one was shown recently).
	Progress func(line string, force bool)
	Version  string
	Host     string
	// Grace bounds the probe's cleanup at the end.
	Grace time.Duration
	// Shard makes the run one driver of several (nil: the only one).
	Shard *Shard
}

// setupCap bounds a stage that has only an op count, so a bench always ends.
const setupCap = 10 * time.Minute

// ErrNotLoopback is returned for a remote target without Options.Yes.
var ErrNotLoopback = errors.New("not a loopback address")

// Run runs the profile and returns its report; the report is returned also
// when a stage failed part-way, with what was measured until then.
func Run(ctx context.Context, o Options) (*Report, error) {
	prof := o.Profile
	p := o.Params
	prof.defaults(&p)
	t, err := pickTarget(o.Config, o.Target, prof)
	if err != nil {
		return nil, err
	}
	if !o.Yes {
		if err := checkLoopback(t); err != nil {
			return nil, fmt.Errorf("target %s: %w: bench loads the store for real; pass --yes to run it against a store that is not on this machine", t.Name, err)
		}
	}
	if err := prof.configure(&t, p); err != nil {
		return nil, err
	}
	stages := prof.stages(p)
	instance := engine.EphemeralInstanceID(o.Config.Global.InstanceID, o.Shard.kind())
	load, err := engine.NewLoad(t, instance, o.Logger)
	if err != nil {
		return nil, err
	}
	r := &Report{Profile: prof.Name, Description: prof.Description, Reproduces: prof.Reproduces, Target: t.Name, Backend: t.Backend, Instance: instance,
		Namespace: load.Namespace(), Version: o.Version, Host: o.Host, Started: time.Now(), Params: params(prof, p),
		Verified: prof.verified(), Notes: prof.notes(p), Shard: o.Shard}
	defer func() {
		if err := load.Close(o.Grace); err != nil {
			r.Notes = append(r.Notes, "cleanup: "+err.Error())
		}
	}()
	show := o.Progress
	if show == nil {
		show = func(string, bool) {}
	}
	show(fmt.Sprintf("[%s] preparing %s on %s", prof.Name, r.Namespace, t.Name), true)
	if err := load.Prepare(ctx); err != nil {
		return nil, fmt.Errorf("preparing target %s: %w", t.Name, err)
	}
	runErr := runStages(ctx, load, stages, r, o.Shard, show, t.Timeout)
	r.Finished = time.Now()
	r.Notes = append(r.Notes, load.BenchNotes()...)
	r.PeakRSSBytes = peakRSS()
	rf := refs{b: o.Baseline, sources: prof.Sources, noRates: prof.TotalRates}
	r.Tables = append(tables(r, rf, prof.Tables(p)), concurrencyTable(r))
	if runErr != nil {
		r.Notes = append(r.Notes, "interrupted: "+runErr.Error())
	}
	return r, runErr
}

// runStages runs the stages in order into r, each at its place in the
// drivers' common schedule when the run is one of several (see Shard.plan).
func runStages(ctx context.Context, load *engine.Load, stages []stageSpec, r *Report, sh *Shard, show func(string, bool), timeout time.Duration) error {
	var plan time.Time
	if sh != nil {
		plan = sh.StartAt
	}
	// wait waits for the common schedule's time t (zero: none), noting lateness.
	wait := func(t time.Time, label, what string) error {
		if t.IsZero() {
			return nil
		}
		late, err := waitUntil(ctx, t, label, show)
		if late > 100*time.Millisecond {
			r.Notes = append(r.Notes, fmt.Sprintf("%s started %s after the drivers' common schedule (%s)", what, late.Round(time.Millisecond), t.UTC().Format(time.RFC3339Nano)))
		}
		return err
	}
	for i, st := range stages {
		label := fmt.Sprintf("[%s] %d/%d %s", r.Profile, i+1, len(stages), st.Name)
		if err := wait(plan, label, "stage "+st.Name); err != nil {
			return err
		}
		if err := warmUp(ctx, load, st, label, show); err != nil {
			return err
		}
		if err := wait(measureAt(plan, st), label, "the measured part of stage "+st.Name); err != nil {
			return err
		}
		sr, err := runStage(ctx, load, st, label, show, timeout)
		r.Stages = append(r.Stages, *sr)
		if !st.Setup {
			for _, op := range sr.Ops {
				r.Failed += op.Failed
			}
		}
		if err != nil {
			return err
		}
		plan = nextPlan(plan, st)
	}
	return nil
}

// warmUp runs the stage for its warm-up, unrecorded.
func warmUp(ctx context.Context, load *engine.Load, st stageSpec, label string, show func(string, bool)) error {
	if st.Warmup <= 0 {
		return nil
	}
	warm := st.Stage
	warm.Duration, warm.MaxOps = st.Warmup, 0
	load.SetSink(nil)
	stop := ticker(func(force bool) { show(fmt.Sprintf("%s  warm-up %s", label, st.Warmup), force) })
	_, err := load.Run(ctx, warm)
	load.Drain(ctx, 5*time.Second)
	stop()
	return err
}

// runStage runs one stage's measured part and returns its report.
func runStage(ctx context.Context, load *engine.Load, st stageSpec, label string, show func(string, bool), timeout time.Duration) (*StageReport, error) {
	if st.Duration <= 0 {
		st.Duration = setupCap
	}
	rec := newStageRecord(st, time.Now())
	load.SetSink(rec.record)
	stop := ticker(func(force bool) { show(progressLine(label, st, rec, time.Since(rec.start)), force) })
	flights := openFlightWindow(load, time.Now())
	var err error
	rec.result, err = load.Run(ctx, st.Stage)
	all, ops := flights.close(time.Now())
	load.Drain(ctx, min(10*time.Second, timeout))
	load.SetSink(nil)
	stop()
	show(progressLine(label, st, rec, rec.result.End.Sub(rec.result.Start)), true)
	sr := rec.report(all, ops)
	return &sr, err
}

// ticker calls f every 250 ms until the returned stop is called.
func ticker(f func(force bool)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		f(true)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f(false)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func progressLine(label string, st stageSpec, rec *stageRecord, el time.Duration) string {
	n, failed, p50, p99 := rec.snapshot()
	limit := ""
	switch {
	case st.MaxOps > 0 && st.Duration == setupCap:
		limit = fmt.Sprintf("%d/%d ops", n, st.MaxOps)
	default:
		limit = fmt.Sprintf("%.1fs/%s", min(el, st.Duration).Seconds(), st.Duration)
	}
	rate := 0.0
	if el > 0 {
		rate = float64(n) / el.Seconds()
	}
	return fmt.Sprintf("%s  %s  %.0f ops/s  p50 %s  p99 %s  errors %d", label, limit, rate, fmtDur(p50), fmtDur(p99), failed)
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + "µs"
	}
	return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + "ms"
}

func params(prof *Profile, p Params) []Param {
	ps := []Param{{"profile", prof.Name}}
	add := func(k, v string) { ps = append(ps, Param{k, v}) }
	if p.Duration > 0 {
		add("duration", p.Duration.String())
	}
	if p.Ops > 0 {
		add("ops", strconv.FormatInt(p.Ops, 10))
	}
	if p.Warmup != nil {
		add("warmup", p.Warmup.String())
	}
	add("workers", strconv.Itoa(p.Workers))
	if p.Rate > 0 {
		add("rate", strconv.FormatFloat(p.Rate, 'f', -1, 64))
	}
	if len(p.Mix) > 0 {
		add("mix", mixString(p.Mix))
	}
	if p.Timeout > 0 {
		add("timeout", p.Timeout.String())
	}
	for _, bp := range prof.Params {
		if v, ok := p.Values[bp.Name]; ok {
			add(bp.Name, v)
		}
	}
	return ps
}

func pickTarget(cfg *config.Config, name string, prof *Profile) (config.Target, error) {
	backend := prof.Backend
	if be, ok := probes.Lookup(backend); ok && name == "" && !slices.ContainsFunc(cfg.Targets, func(t config.Target) bool { return t.Backend == backend }) {
		// A backend that connects nowhere (the measurement floor) needs no
		// store: without a target in the config, the profile runs one of its own.
		c := be.NewConfig()
		if e, ok := c.(probes.Endpointer); ok && len(e.Endpoints()) == 0 {
			return config.Target{Name: prof.Name, Backend: backend, Timeout: cfg.Global.Timeout, MaxInFlight: 1, Probe: c}, nil
		}
	}
	var names []string
	for _, t := range cfg.Targets {
		if name != "" && t.Name == name {
			if t.Backend != backend {
				return config.Target{}, fmt.Errorf("target %s is a %s target; this profile needs %s", name, t.Backend, backend)
			}
			return t, nil
		}
		if name == "" && t.Backend == backend {
			return t, nil
		}
		names = append(names, t.Name+" ("+t.Backend+")")
	}
	if name != "" {
		return config.Target{}, fmt.Errorf("no target named %q in the config (targets: %s)", name, strings.Join(names, ", "))
	}
	return config.Target{}, fmt.Errorf("the config has no %s target (targets: %s)", backend, strings.Join(names, ", "))
}

// hosts lists the hosts a target's probe connects to.
func hosts(t config.Target) []string {
	var out []string
	fromURL := func(s string) {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			out = append(out, u.Hostname())
		} else {
			out = append(out, hostOnly(s))
		}
	}
	e, ok := t.Probe.(probes.Endpointer)
	if !ok {
		return nil
	}
	for _, ep := range e.Endpoints() {
		if strings.Contains(ep, "://") {
			fromURL(ep)
		} else {
			out = append(out, hostOnly(ep))
		}
	}
	return out
}

func hostOnly(hp string) string {
	if h, _, err := net.SplitHostPort(hp); err == nil {
		return h
	}
	return strings.Trim(hp, "[]")
}

// checkLoopback accepts only hosts that are, or resolve only to, loopback
// addresses. A probe that connects nowhere (its config's Endpoints are
// empty) is accepted; one that does not say where it connects is refused.
func checkLoopback(t config.Target) error {
	if _, ok := t.Probe.(probes.Endpointer); !ok {
		return fmt.Errorf("cannot tell where %s connects: %w", t.Backend, ErrNotLoopback)
	}
	for _, h := range hosts(t) {
		if h == "localhost" {
			continue
		}
		var ips []net.IP
		if ip := net.ParseIP(h); ip != nil {
			ips = []net.IP{ip}
		} else {
			addrs, err := net.LookupIP(h)
			if err != nil || len(addrs) == 0 {
				return fmt.Errorf("host %s does not resolve (%v): %w", h, err, ErrNotLoopback)
			}
			ips = addrs
		}
		for _, ip := range ips {
			if !ip.IsLoopback() {
				return fmt.Errorf("host %s (%s) is %w", h, ip, ErrNotLoopback)
			}
		}
	}
	return nil
}
