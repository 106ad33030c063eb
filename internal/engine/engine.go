// Package engine runs the configured targets: it builds a probe per target,
// schedules its ops open-loop, bounds in-flight ops, records metrics, and
// applies reloaded configs by restarting only the targets that changed.
package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/probes"
)

// Engine owns the running targets.
type Engine struct {
	m      *metrics.Metrics
	logger *slog.Logger
	grace  time.Duration

	observer Observer

	// applyMu serialises Apply and Stop, which may wait out grace periods.
	// Nothing a scrape or the status page calls takes it.
	applyMu sync.Mutex
	runners map[string]*runner // guarded by applyMu
	prints  map[string]string  // target name -> fingerprint of its config; guarded by applyMu
	cfg     atomic.Pointer[config.Config]

	// ledgers is the one store every target's durability ledger is opened
	// from; its metrics are registered with the others.
	ledgers *probes.LedgerStore
	// nodes exports the store nodes' state of the probes that know it (NodeStater).
	nodes *metrics.NodeUp
}

// New returns an idle engine; Apply starts targets. grace bounds how long
// stopping a target waits for its in-flight ops.
func New(m *metrics.Metrics, reg prometheus.Registerer, logger *slog.Logger, grace time.Duration) *Engine {
	e := &Engine{m: m, logger: logger, grace: grace, runners: map[string]*runner{}, prints: map[string]string{}, ledgers: probes.NewLedgerStore(""), nodes: metrics.NewNodeUp()}
	if reg != nil {
		reg.MustRegister(&targetInfo{e: e}, e.ledgers, e.nodes)
	}
	return e
}

// Ledgers is the store of the targets' durability ledgers: the daemon sets
// its state directory (global.state_dir), the status page reads it.
func (e *Engine) Ledgers() *probes.LedgerStore { return e.ledgers }

// Apply makes the running targets match cfg. Probes for new and changed
// targets are built first: if any cannot be built, nothing changes and the
// error is returned (the old config keeps running). Unchanged targets keep
// running undisturbed, their counters intact.
func (e *Engine) Apply(cfg *config.Config) error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	want := map[string]config.Target{}
	prints := map[string]string{}
	for _, t := range cfg.Targets {
		want[t.Name] = t
		fp, err := fingerprint(t, cfg.Global.InstanceID)
		if err != nil {
			return fmt.Errorf("target %s: %w", t.Name, err)
		}
		prints[t.Name] = fp
	}
	fresh := map[string]*runner{}
	for name, t := range want {
		if old, ok := e.prints[name]; ok && old == prints[name] {
			continue
		}
		r, err := newRunner(t, cfg.Global.InstanceID, false, e.ledgers, e.logger)
		if err != nil {
			for _, f := range fresh {
				_ = f.closeProbe()
			}
			return err
		}
		fresh[name] = r
	}
	// Stop what is removed or replaced, in parallel: each may wait out its grace period.
	var wg sync.WaitGroup
	for name, r := range e.runners {
		_, keep := want[name]
		_, replaced := fresh[name]
		if keep && !replaced {
			continue
		}
		delete(e.runners, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.stop(e.grace)
			e.m.DeleteTarget(name)
			e.nodes.Set(name, "", nil)
			if !keep {
				if e.observer != nil {
					e.observer.TargetStopped(name)
				}
				e.logger.Info("target removed", "target", name)
			}
		}()
	}
	wg.Wait()
	for name, r := range fresh {
		r.attachMetrics(e.m)
		if n, ok := r.probe.(NodeStater); ok {
			e.nodes.Set(name, r.target.Backend, n.NodeStates)
		}
		r.observer = e.observer
		if e.observer != nil {
			ns := ""
			if n, ok := r.probe.(Namespacer); ok {
				ns = n.Namespace()
			}
			e.observer.TargetStarted(name, r.target.Backend, opNames(r), ns)
			if n, ok := r.probe.(NodeStater); ok {
				if o, ok := e.observer.(NodeObserver); ok {
					o.TargetNodes(name, n.NodeStates)
				}
			}
		}
		e.runners[name] = r
		r.start()
		e.logger.Info("target started", "target", name, "backend", r.target.Backend, "ops", opNames(r))
	}
	e.prints = prints
	e.cfg.Store(cfg)
	e.m.Targets.Set(float64(len(e.runners)))
	return nil
}

// Stop stops every target.
func (e *Engine) Stop() {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	var wg sync.WaitGroup
	for name, r := range e.runners {
		wg.Add(1)
		go func() { defer wg.Done(); r.stop(e.grace) }()
		delete(e.runners, name)
		e.nodes.Set(name, "", nil)
	}
	wg.Wait()
}

func opNames(r *runner) []string {
	names := make([]string, len(r.ops))
	for i, s := range r.ops {
		names[i] = s.op.Name
	}
	return names
}

// fingerprint identifies a target's effective config, to restart only
// targets whose config changed on reload.
func fingerprint(t config.Target, instance string) (string, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	if err := enc.Encode(struct {
		Instance string
		T        config.Target
		Probe    any
		Ops      []config.Op
	}{instance, t, t.Probe, t.Resolved}); err != nil {
		return "", err
	}
	return b.String(), nil
}

// targetInfo exports dbcanary_target_info{target, backend, <static labels>} = 1.
// Static labels differ per target, so the label set is the union of every
// target's label names (empty where a target lacks one), rebuilt per scrape.
type targetInfo struct{ e *Engine }

func (ti *targetInfo) Describe(chan<- *prometheus.Desc) {} // unchecked: labels follow the config

func (ti *targetInfo) Collect(ch chan<- prometheus.Metric) {
	cfg := ti.e.cfg.Load() // never the apply lock: a reload must not stall a scrape
	if cfg == nil {
		return
	}
	keySet := map[string]bool{}
	for _, t := range cfg.Targets {
		for k := range t.Labels {
			keySet[k] = true
		}
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	desc := prometheus.NewDesc("dbcanary_target_info",
		"Static labels of each target from the config (join on target).",
		append([]string{"target", "backend"}, keys...), nil)
	for _, t := range cfg.Targets {
		vals := []string{t.Name, t.Backend}
		for _, k := range keys {
			vals = append(vals, t.Labels[k])
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 1, vals...)
	}
}
