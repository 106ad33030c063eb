//go:build integration

package faults

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/internal/web"
	"github.com/dbcanary/dbcanary/test/stack"
)

// spec describes how to probe one backend through the fault proxy.
type spec struct {
	name  string // dbcanary backend name (also the YAML section key)
	stack string // test/stack script name
	// upstream is the real server's host:port.
	upstream func(t *testing.T, env stack.Env) string
	// section is the backend's YAML section, connecting to addr (the relay).
	section func(t *testing.T, env stack.Env, addr, target string) string
	// ops is the target's ops map with the steady op at rate.
	ops func(rate float64) string
	// steady is the op timed by the latency and stall tests.
	steady string
	// roundTrips is how many request/response exchanges one steady op makes:
	// a downstream latency toxic adds its latency once per exchange.
	roundTrips int
	// maxBackoff is the probe's reconnect backoff cap; 0 means it has none
	// (it dials whenever an op needs a connection).
	maxBackoff time.Duration
	// triesPerOp is how many connections one op may open against an
	// unreachable store (1 + its client's retries).
	triesPerOp int
	// dialBound, when set, bounds the connections the probe may open while
	// the store is unreachable for a window, from its reconnect design
	// (dialModel); otherwise only "no more than one per op try" is checked.
	dialBound func(window time.Duration) float64
	dialModel string
	// otherRate is the rate of the target's other scheduled ops (ops/s).
	otherRate float64
}

// params are the engine settings of one test.
type params struct {
	rate        float64
	timeout     time.Duration
	maxInFlight int
}

func (p params) interval() time.Duration { return time.Duration(float64(time.Second) / p.rate) }

// fixture is one backend's path: dbcanary -> relay -> Toxiproxy -> server.
type fixture struct {
	spec  *spec
	env   stack.Env
	proxy *toxiproxy.Proxy
	relay *relay
}

func newFixture(t *testing.T, sp *spec, env stack.Env) *fixture {
	t.Helper()
	tc := toxiproxy.NewClient(toxiAddr)
	name := "dbcanary_faults_" + sp.name
	if old, err := tc.Proxy(name); err == nil {
		_ = old.Delete()
	}
	proxy, err := tc.CreateProxy(name, "127.0.0.1:0", sp.upstream(t, env))
	if err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(func() { _ = proxy.Delete() })
	if !strings.HasPrefix(proxy.Listen, "127.0.0.1:") || strings.HasSuffix(proxy.Listen, ":0") {
		t.Fatalf("proxy listens on %q", proxy.Listen)
	}
	return &fixture{spec: sp, env: env, proxy: proxy, relay: startRelay(t, proxy.Listen)}
}

// ensure recreates the proxy, on the same address, if Toxiproxy was
// restarted meanwhile (it is shared: another package's cleanup may stop it),
// and clears any toxic a failed test left.
func (f *fixture) ensure(t *testing.T) {
	t.Helper()
	if _, err := stack.Start("toxiproxy"); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	tc := toxiproxy.NewClient(toxiAddr)
	if p, err := tc.Proxy(f.proxy.Name); err == nil {
		f.proxy = p
	} else {
		p, err := tc.CreateProxy(f.proxy.Name, f.proxy.Listen, f.proxy.Upstream)
		if err != nil {
			t.Fatalf("toxiproxy: recreating proxy %s on %s: %v", f.proxy.Name, f.proxy.Listen, err)
		}
		t.Logf("toxiproxy had been restarted: proxy %s recreated on %s", p.Name, p.Listen)
		f.proxy = p
	}
	if !f.proxy.Enabled {
		_ = f.proxy.Enable()
	}
	if toxics, err := f.proxy.Toxics(); err == nil {
		for _, x := range toxics {
			_ = f.proxy.RemoveToxic(x.Name)
		}
	}
}

// toxic adds a toxic and removes it when the test ends (if still there).
func (f *fixture) toxic(t *testing.T, name, typ, stream string, attrs toxiproxy.Attributes) {
	t.Helper()
	if _, err := f.proxy.AddToxic(name, typ, stream, 1, attrs); err != nil {
		t.Fatalf("add %s toxic: %v", typ, err)
	}
	t.Cleanup(func() { _ = f.proxy.RemoveToxic(name) })
}

func (f *fixture) removeToxic(t *testing.T, name string) {
	t.Helper()
	if err := f.proxy.RemoveToxic(name); err != nil {
		t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// engine starts a real engine with one target probing through the relay.
func (f *fixture) engine(t *testing.T, target string, p params) *enginetest.Harness {
	t.Helper()
	return f.engineOps(t, target, p, f.spec.ops(p.rate), "")
}

// engineOps is engine with an explicit ops map and extra section lines.
func (f *fixture) engineOps(t *testing.T, target string, p params, ops, extra string) *enginetest.Harness {
	t.Helper()
	f.ensure(t)
	section := f.spec.section(t, f.env, f.relay.Addr(), target) + extra
	yaml := fmt.Sprintf(`global: {instance_id: faults, timeout: %s, max_in_flight: %d}
targets:
  - name: %s
    backend: %s
    ops:
%s
    %s:
%s
`, p.timeout, p.maxInFlight, target, f.spec.name, enginetest.Indent(ops, 6), f.spec.name, enginetest.Indent(section, 6))
	return startEngine(t, yaml)
}

// startEngine is enginetest.Start with a bounded stop: a probe whose Close
// hangs must not freeze the whole package.
func startEngine(t *testing.T, yaml string) *enginetest.Harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	// Full: the scenarios count samples above 0.1, 1 and 2.5 s in the
	// latency and service-time histograms (compact has no such bounds).
	m := metrics.NewWith(reg, metrics.Options{Histograms: metrics.Full})
	e := engine.New(m, reg, enginetest.Logger(), 2*time.Second)
	cfg := enginetest.Parse(t, yaml)
	if err := e.Apply(cfg); err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { e.Stop(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Stop is bounded by the grace period per target, Close included.
			t.Errorf("Engine.Stop did not return within 10 s")
		}
	})
	return &enginetest.Harness{Registry: reg, Metrics: m, Engine: e, Config: cfg}
}

// probe reads one target's metrics.
type probe struct {
	t      *testing.T
	h      *enginetest.Harness
	target string
	op     string // the steady op
}

func (p probe) l(kv ...string) enginetest.L {
	l := enginetest.L{"target": p.target}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

func (p probe) up() float64 { return p.h.Value(p.t, "dbcanary_target_up", p.l()) }

func (p probe) ok() uint64 {
	return p.h.HistogramCount(p.t, "dbcanary_op_latency_seconds", p.l("op", p.op, "result", "ok"))
}

func (p probe) failures(cause string) float64 {
	if cause == "" {
		return p.h.Value(p.t, "dbcanary_op_failures_total", p.l())
	}
	return p.h.Value(p.t, "dbcanary_op_failures_total", p.l("cause", cause))
}

// causes returns every op's failure counts by cause.
func (p probe) causes() map[string]float64 {
	out := map[string]float64{}
	for _, m := range p.h.Find(p.t, "dbcanary_op_failures_total", p.l()) {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "cause" {
				out[lp.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func diffCauses(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for c, v := range after {
		if d := v - before[c]; d != 0 {
			out[c] = d
		}
	}
	return out
}

func (p probe) lastSuccess() float64 {
	return p.h.Value(p.t, "dbcanary_last_success_timestamp_seconds", p.l("op", p.op))
}

// waitUntil polls cond every 50 ms and returns how long it took to hold.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(t0)
}

// sleepUntil sleeps until a point in time (no-op if it passed).
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// inFlightSampler reads dbcanary_op_in_flight every 20 ms.
type inFlightSampler struct {
	max, samples atomic.Int64
	stop         chan struct{}
	done         chan struct{}
}

func sampleInFlight(t *testing.T, h *enginetest.Harness, target, backend string) *inFlightSampler {
	g := h.Metrics.InFlight.WithLabelValues(target, backend)
	s := &inFlightSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range 30000 { // at most 10 minutes
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			var m dto.Metric
			if err := g.Write(&m); err != nil {
				continue
			}
			v := int64(m.GetGauge().GetValue())
			s.samples.Add(1)
			for {
				cur := s.max.Load()
				if v <= cur || s.max.CompareAndSwap(cur, v) {
					break
				}
			}
		}
	}()
	t.Cleanup(s.Stop)
	return s
}

// Stop ends sampling (max and samples hold the highest value seen and the count).
func (s *inFlightSampler) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// scraper reads /metrics every second from a real HTTP endpoint serving the
// engine's registry through internal/web, as Prometheus would.
type scraper struct {
	url        string
	target     string
	ok, failed atomic.Int64
	mu         sync.Mutex
	lastErr    error
	upSeries   []upPoint // target_up as scraped
	stop, done chan struct{}
}

type upPoint struct {
	at time.Time
	up float64
}

func startScraper(t *testing.T, h *enginetest.Harness, target string) *scraper {
	t.Helper()
	handler, err := web.Handler(web.Options{
		Registry: h.Registry, MetricsPath: "/metrics", Version: "faults-test", Logger: enginetest.Logger(),
		Ready: func() bool { return true }, Reload: func() error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler) // 127.0.0.1:0
	s := &scraper{url: srv.URL + "/metrics", target: target, stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for range 600 { // at most 10 minutes
			s.scrape(client)
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.Stop(); srv.Close() })
	return s
}

func (s *scraper) scrape(client *http.Client) {
	resp, err := client.Get(s.url)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	up := -1.0
	if err == nil {
		prefix := `dbcanary_target_up{backend=`
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, prefix) && strings.Contains(line, `target="`+s.target+`"`) {
				if i := strings.LastIndexByte(line, ' '); i > 0 {
					up, _ = strconv.ParseFloat(line[i+1:], 64)
				}
			}
		}
		err = sc.Err()
	}
	if resp != nil {
		_ = resp.Body.Close()
	}
	if err == nil && up < 0 {
		err = fmt.Errorf("no dbcanary_target_up series for %s", s.target)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed.Add(1)
		s.lastErr = err
		return
	}
	s.ok.Add(1)
	s.upSeries = append(s.upSeries, upPoint{time.Now(), up})
}

func (s *scraper) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// firstScrape returns when the scraped target_up first equalled v after t0.
func (s *scraper) firstScrape(t0 time.Time, v float64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.upSeries {
		if p.at.After(t0) && p.up == v {
			return p.at, true
		}
	}
	return time.Time{}, false
}
