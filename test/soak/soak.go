// Command soak runs dbcanary against every backend of the local stack for a
// long time, through toxiproxy, with periodic injected faults (latency,
// connection resets, blackholes), samples the daemon's /metrics every
// interval and writes a CSV and a markdown summary of RSS, goroutines, ops
// and failures over time.
//
//	SOAK_DURATION=30m go run ./test/soak            (make soak)
//
// Environment: SOAK_DURATION (default 30m), SOAK_INTERVAL (10s),
// SOAK_FAULT_EVERY (3m: one fault window starts this often), SOAK_FAULT_FOR
// (30s), SOAK_OUT (output directory, default $DBCANARY_STACK_DIR/soak/<time>).
// Backends it started are stopped at the end unless DBCANARY_STACK_KEEP=1.
package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/all"
	"github.com/dbcanary/dbcanary/test/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 30m", name, v)
	}
	return d, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s soak: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// soakBackend is how the soak reaches one backend of the local stack: its
// stack script, the address its proxy forwards to, and its target in the
// config (the proxy's listen address in place of the server's).
type soakBackend struct {
	script   string
	upstream func(env stack.Env) string
	target   func(env stack.Env, proxy string) string
}

// soakBackends are the backends the soak knows how to reach. It probes every
// registered backend that has a board (a new one fails the soak until it
// has an entry here) and noop, whose overhead is its baseline.
var soakBackends = map[string]soakBackend{
	"rabbitmq": {script: "rabbitmq",
		upstream: func(e stack.Env) string {
			return strings.TrimSuffix(strings.TrimPrefix(e["DBCANARY_TEST_RABBITMQ_URL"], "amqp://"), "/")
		},
		target: func(e stack.Env, proxy string) string {
			return fmt.Sprintf(`  - name: soak-rabbitmq
    backend: rabbitmq
    ops: {publish: {rate: 2}, consume: {}}
    rabbitmq: {url: "amqp://%s/", username: %s, password_file: %s, loss_timeout: 30s, connect_timeout: 3s}
`, proxy, e["DBCANARY_TEST_RABBITMQ_USER"], e["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"])
		}},
	"cassandra": {script: "cassandra",
		upstream: func(e stack.Env) string {
			return net.JoinHostPort(e["DBCANARY_TEST_CASSANDRA_HOST"], e["DBCANARY_TEST_CASSANDRA_PORT"])
		},
		target: func(e stack.Env, proxy string) string {
			_, port, _ := net.SplitHostPort(proxy)
			return fmt.Sprintf(`  - name: soak-cassandra
    backend: cassandra
    ops: {insert: {rate: 1}, read: {rate: 2}, read_miss: {rate: 0.5}}
    cassandra:
      hosts: ["127.0.0.1"]
      port: %s
      username: %s
      password_file: %s
      local_dc: %s
      keyspace: dbcanary_soak
      replication: {class: SimpleStrategy, replication_factor: 1}
      ttl: 10m
      connect_timeout: 3s
      request_timeout: 3s
`, port, e["DBCANARY_TEST_CASSANDRA_USER"], e["DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"], e["DBCANARY_TEST_CASSANDRA_DC"])
		}},
	"opensearch": {script: "opensearch",
		upstream: func(e stack.Env) string { return strings.TrimPrefix(e["DBCANARY_TEST_OPENSEARCH_URL"], "http://") },
		target: func(_ stack.Env, proxy string) string {
			return fmt.Sprintf(`  - name: soak-opensearch
    backend: opensearch
    ops: {index: {rate: 1}, bulk: {rate: 0.2}, search_default: {rate: 0.5}, search_term: {rate: 0.5}, get: {rate: 1}, visibility: {rate: 0.2}}
    opensearch: {addresses: ["http://%s"], replicas: 0, refresh_interval: 1s, bulk_size: 5, connect_timeout: 3s, request_timeout: 4s, visibility_timeout: 4s}
`, proxy)
		}},
	"s3": {script: "minio",
		upstream: func(e stack.Env) string { return e["DBCANARY_TEST_S3_ENDPOINT"] },
		target: func(e stack.Env, proxy string) string {
			return fmt.Sprintf(`  - name: soak-s3
    backend: s3
    ops: {"*_4KiB": {rate: 1}, "*_128KiB": {rate: 0.5}, list: {rate: 0.2}}
    s3: {endpoint: "http://%s", addressing: path, bucket: dbcanary-soak, sizes: [4KiB, 128KiB], access_key_id_file: %s, secret_access_key_file: %s, connect_timeout: 3s}
`, proxy, e["DBCANARY_TEST_S3_ACCESS_KEY_FILE"], e["DBCANARY_TEST_S3_SECRET_KEY_FILE"])
		}},
}

// soaked are the registered backends that have a board, sorted by name.
func soaked() ([]string, error) {
	var out []string
	for _, name := range probes.Names() {
		if be, _ := probes.Lookup(name); be.Facts.NoBoard {
			continue
		}
		if _, ok := soakBackends[name]; !ok {
			return nil, fmt.Errorf("backend %s has no entry in soakBackends (test/soak/soak.go): how to start, proxy and probe it", name)
		}
		out = append(out, name)
	}
	return out, nil
}

// settings are the soak's knobs, from the SOAK_* environment.
type settings struct {
	duration, interval, faultEvery, faultFor time.Duration
	outDir                                   string
}

func loadSettings() (settings, error) {
	var st settings
	for _, d := range []struct {
		dst  *time.Duration
		name string
		def  time.Duration
	}{{&st.duration, "SOAK_DURATION", 30 * time.Minute}, {&st.interval, "SOAK_INTERVAL", 10 * time.Second},
		{&st.faultEvery, "SOAK_FAULT_EVERY", 3 * time.Minute}, {&st.faultFor, "SOAK_FAULT_FOR", 30 * time.Second}} {
		v, err := envDuration(d.name, d.def)
		if err != nil {
			return st, err
		}
		*d.dst = v
	}
	st.outDir = os.Getenv("SOAK_OUT")
	if st.outDir == "" {
		sd := os.Getenv("DBCANARY_STACK_DIR")
		if sd == "" {
			sd = "/var/tmp/dbcanary-stack"
		}
		st.outDir = filepath.Join(sd, "soak", time.Now().Format("20060102-150405"))
	}
	return st, os.MkdirAll(st.outDir, 0o755)
}

func run() error {
	st, err := loadSettings()
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	defer stack.Cleanup()

	backends, err := soaked()
	if err != nil {
		return err
	}
	envs := map[string]stack.Env{}
	for _, script := range append([]string{"toxiproxy"}, scriptsOf(backends)...) {
		logf("starting %s", script)
		env, err := stack.Start(script)
		if err != nil {
			return err
		}
		envs[script] = env
	}
	proxies, err := newProxies(envs, backends)
	defer func() {
		for _, p := range proxies {
			_ = p.Delete()
		}
	}()
	if err != nil {
		return err
	}
	d, err := startDaemon(ctx, st.outDir, soakConfig(backends, envs, proxies))
	if err != nil {
		return err
	}
	defer d.stop()
	logf("dbcanary pid %d on http://%s, for %s, sampling every %s, a %s fault every %s; output in %s",
		d.cmd.Process.Pid, d.addr, st.duration, st.interval, st.faultFor, st.faultEvery, st.outDir)
	return soak(ctx, st, d, newFaultPlan(proxies, st.faultEvery, st.faultFor))
}

// newProxies makes one toxiproxy proxy per backend; faults are toxics on them.
// The proxies made are returned also on error, for the caller to delete.
func newProxies(envs map[string]stack.Env, backends []string) (map[string]*toxiproxy.Proxy, error) {
	tc := toxiproxy.NewClient(envs["toxiproxy"]["DBCANARY_TEST_TOXIPROXY_ADDR"])
	proxies := map[string]*toxiproxy.Proxy{}
	for _, b := range backends {
		upstream := soakBackends[b].upstream(envs[soakBackends[b].script])
		name := "dbcanary_soak_" + b
		if old, err := tc.Proxy(name); err == nil {
			_ = old.Delete()
		}
		p, err := tc.CreateProxy(name, "127.0.0.1:0", upstream)
		if err != nil {
			return proxies, fmt.Errorf("toxiproxy %s: %w", name, err)
		}
		proxies[b] = p
		logf("%s: proxy %s -> %s", b, p.Listen, upstream)
	}
	return proxies, nil
}

// soakDaemon is the dbcanary under soak: a binary built for the run, its
// address and its log.
type soakDaemon struct {
	cmd     *exec.Cmd
	addr    string
	logFile *os.File
	exited  chan error
}

// startDaemon builds dbcanary into outDir and starts it on cfg and a free port.
func startDaemon(ctx context.Context, outDir, cfg string) (*soakDaemon, error) {
	bin := filepath.Join(outDir, "dbcanary")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/dbcanary")
	build.Dir = stack.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(outDir, "dbcanary.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &soakDaemon{addr: l.Addr().String(), exited: make(chan error, 1)}
	l.Close()
	if d.logFile, err = os.Create(filepath.Join(outDir, "dbcanary.log")); err != nil {
		return nil, err
	}
	d.cmd = exec.Command(bin, "run", "--config.file", cfgPath, "--web.listen-address", d.addr, "--shutdown.grace-period", "5s")
	d.cmd.Stdout, d.cmd.Stderr = d.logFile, d.logFile
	if err := d.cmd.Start(); err != nil {
		d.logFile.Close()
		return nil, err
	}
	go func() { d.exited <- d.cmd.Wait() }()
	return d, nil
}

// stop ends the daemon with SIGTERM, or SIGKILL after 30 s.
func (d *soakDaemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.logFile.Close()
}

// soak samples the daemon's metrics every interval into soak.csv while the
// fault plan runs, until the duration ends or ctx is cancelled, then writes
// summary.md.
func soak(ctx context.Context, st settings, d *soakDaemon, faults *faultPlan) error {
	csvFile, err := os.Create(filepath.Join(st.outDir, "soak.csv"))
	if err != nil {
		return err
	}
	defer csvFile.Close()
	w := csv.NewWriter(csvFile)
	header := []string{"elapsed_s", "rss_bytes", "heap_bytes", "goroutines", "ops_total", "ops_ok", "failures_total"}
	for _, c := range probes.Causes {
		header = append(header, "failures_"+string(c))
	}
	header = append(header, "fault")
	_ = w.Write(header)

	start := time.Now()
	end := start.Add(st.duration)
	var samples []sample
	tick := time.NewTicker(st.interval)
	defer tick.Stop()
	client := &http.Client{Timeout: 5 * time.Second}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			logf("interrupted: writing the report for what ran")
			done = true
		case err := <-d.exited:
			faults.clear()
			d.exited <- err // for stop
			return fmt.Errorf("dbcanary exited during the soak: %v (see %s)", err, d.logFile.Name())
		case now := <-tick.C:
			fault := faults.active
			if now.Before(end) {
				fault = faults.step(now.Sub(start)) // no window starts at the last sample
			}
			s, err := scrape(client, "http://"+d.addr+"/metrics")
			if err != nil {
				logf("scrape: %v", err)
				continue
			}
			s.elapsed, s.fault = now.Sub(start), fault
			samples = append(samples, s)
			_ = w.Write(s.row())
			w.Flush()
			if len(samples)%6 == 1 {
				logf("%s: rss %.1f MiB, goroutines %.0f, ops %.0f (%.0f failed), fault %s",
					s.elapsed.Round(time.Second), s.rss/(1<<20), s.goroutines, s.ops, s.failures, orNone(fault))
			}
			done = !now.Before(end)
		}
	}
	faults.clear()
	report := summary(samples, faults.windows, st.duration, st.interval, st.faultFor, d.addr)
	if err := os.WriteFile(filepath.Join(st.outDir, "summary.md"), []byte(report), 0o644); err != nil {
		return err
	}
	fmt.Print(report)
	logf("wrote %s and %s", csvFile.Name(), filepath.Join(st.outDir, "summary.md"))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// scriptsOf lists the stack scripts of the backends, each once.
func scriptsOf(backends []string) []string {
	var out []string
	for _, b := range backends {
		if s := soakBackends[b].script; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// soakConfig probes every backend through its proxy at low rates, and noop.
func soakConfig(backends []string, envs map[string]stack.Env, proxies map[string]*toxiproxy.Proxy) string {
	var b strings.Builder
	b.WriteString("global: {instance_id: soak, timeout: 5s, max_in_flight: 8}\ntargets:\n")
	for _, name := range backends {
		sb := soakBackends[name]
		b.WriteString(sb.target(envs[sb.script], proxies[name].Listen))
	}
	b.WriteString("  - name: soak-noop\n    backend: noop\n    ops: {noop: {rate: 5}}\n")
	return b.String()
}

// A faultPlan starts one fault window every `every`, on one backend at a
// time, rotating through the fault kinds and the backends, and removes it
// after `dur`.
type faultPlan struct {
	proxies map[string]*toxiproxy.Proxy
	order   []string
	every   time.Duration
	dur     time.Duration
	n       int
	active  string
	target  *toxiproxy.Proxy
	until   time.Duration
	windows []window
}

type window struct {
	name       string
	start, end time.Duration
}

var faultKinds = []string{"latency", "reset", "blackhole"}

func newFaultPlan(proxies map[string]*toxiproxy.Proxy, every, dur time.Duration) *faultPlan {
	order := make([]string, 0, len(proxies))
	for b := range proxies {
		order = append(order, b)
	}
	sort.Strings(order)
	return &faultPlan{proxies: proxies, order: order, every: every, dur: dur}
}

// step starts or ends fault windows at elapsed time e and returns the active one.
func (f *faultPlan) step(e time.Duration) string {
	if f.active != "" && e >= f.until {
		f.clear()
		f.windows[len(f.windows)-1].end = e
	}
	// Windows start at every, 2*every, ...: the first interval is a clean baseline.
	if f.active == "" && e >= time.Duration(f.n+1)*f.every {
		// 3 kinds and 4 backends are coprime: consecutive windows hit a new
		// backend each time, and 12 windows cover every pair.
		kind := faultKinds[f.n%len(faultKinds)]
		backend := f.order[f.n%len(f.order)]
		f.n++
		p := f.proxies[backend]
		var err error
		switch kind {
		case "latency": // +1 s ± 200 ms on every response
			_, err = p.AddToxic("soak", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 1000, "jitter": 200})
		case "reset": // every connection is reset at once (TCP RST)
			_, err = p.AddToxic("soak", "reset_peer", "downstream", 1, toxiproxy.Attributes{"timeout": 0})
		case "blackhole": // data is swallowed, connections stay open
			_, err = p.AddToxic("soak", "timeout", "downstream", 1, toxiproxy.Attributes{"timeout": 0})
		}
		if err != nil {
			logf("fault %s on %s: %v", kind, backend, err)
			return ""
		}
		f.active, f.target, f.until = kind+":"+backend, p, e+f.dur
		f.windows = append(f.windows, window{name: f.active, start: e})
		logf("fault %s on %s for %s", kind, backend, f.dur)
	}
	return f.active
}

func (f *faultPlan) clear() {
	if f.target != nil {
		if err := f.target.RemoveToxic("soak"); err != nil {
			logf("removing fault %s: %v", f.active, err)
		}
		logf("fault %s cleared", f.active)
	}
	f.active, f.target = "", nil
}

// sample is one scrape of the daemon.
type sample struct {
	elapsed               time.Duration
	rss, heap, goroutines float64
	ops, ok, failures     float64
	byCause               map[string]float64
	opsBy, okBy, failBy   map[string]float64 // by backend
	fault                 string
}

func (s sample) row() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	r := []string{f(s.elapsed.Seconds()), f(s.rss), f(s.heap), f(s.goroutines), f(s.ops), f(s.ok), f(s.failures)}
	for _, c := range probes.Causes {
		r = append(r, f(s.byCause[string(c)]))
	}
	return append(r, s.fault)
}

func scrape(c *http.Client, url string) (sample, error) {
	resp, err := c.Get(url)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return sample{}, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return sample{}, err
	}
	s := sample{byCause: map[string]float64{}, opsBy: map[string]float64{}, okBy: map[string]float64{}, failBy: map[string]float64{}}
	value := func(name string) float64 {
		mf, ok := mfs[name]
		if !ok || len(mf.GetMetric()) == 0 {
			return math.NaN()
		}
		m := mf.GetMetric()[0]
		if m.Gauge != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	s.rss = value("process_resident_memory_bytes")
	s.heap = value("go_memstats_heap_alloc_bytes")
	s.goroutines = value("go_goroutines")
	if mf, ok := mfs["dbcanary_op_latency_seconds"]; ok {
		for _, m := range mf.GetMetric() {
			n := float64(m.GetHistogram().GetSampleCount())
			s.ops += n
			s.opsBy[label(m, "backend")] += n
			if label(m, "result") == "ok" {
				s.ok += n
				s.okBy[label(m, "backend")] += n
			}
		}
	}
	if mf, ok := mfs["dbcanary_op_failures_total"]; ok {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			s.failures += v
			s.byCause[label(m, "cause")] += v
			s.failBy[label(m, "backend")+" "+label(m, "cause")] += v
		}
	}
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// summary renders the report: first and last values, extremes, the trend
// of RSS and goroutines between the second and the last quarter of the run
// (growth there, with faults on and off in both, is what a leak looks like).
func summary(samples []sample, windows []window, planned, interval, faultFor time.Duration, addr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# dbcanary soak report\n\n")
	if len(samples) < 2 {
		fmt.Fprintf(&b, "Too few samples (%d) for a report.\n", len(samples))
		return b.String()
	}
	first, last := samples[0], samples[len(samples)-1]
	fmt.Fprintf(&b, "- ran for **%s** (planned %s), %d samples every %s of http://%s/metrics\n",
		last.elapsed.Round(time.Second), planned, len(samples), interval, addr)
	fmt.Fprintf(&b, "- targets: rabbitmq, cassandra, opensearch, s3 (MinIO), each through its own toxiproxy proxy, plus noop\n")
	fmt.Fprintf(&b, "- %d fault windows of %s (latency +1 s, TCP reset, blackhole), one backend at a time\n\n", len(windows), faultFor)

	col := func(get func(sample) float64) (lo, hi float64) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, s := range samples {
			lo, hi = math.Min(lo, get(s)), math.Max(hi, get(s))
		}
		return
	}
	quarterMean := func(q int, get func(sample) float64) float64 {
		n := len(samples)
		from, to := n*q/4, n*(q+1)/4
		if to <= from {
			return math.NaN()
		}
		sum := 0.0
		for _, s := range samples[from:to] {
			sum += get(s)
		}
		return sum / float64(to-from)
	}
	fmt.Fprintf(&b, "| | first | min | max | last | mean 2nd quarter | mean 4th quarter | change |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range []struct {
		name  string
		get   func(sample) float64
		scale float64
		unit  string
	}{
		{"RSS", func(s sample) float64 { return s.rss }, 1 << 20, " MiB"},
		{"Go heap", func(s sample) float64 { return s.heap }, 1 << 20, " MiB"},
		{"goroutines", func(s sample) float64 { return s.goroutines }, 1, ""},
	} {
		lo, hi := col(m.get)
		q2, q4 := quarterMean(1, m.get), quarterMean(3, m.get)
		fmt.Fprintf(&b, "| %s | %.1f%s | %.1f%s | %.1f%s | %.1f%s | %.1f%s | %.1f%s | %+.1f%% |\n", m.name,
			m.get(first)/m.scale, m.unit, lo/m.scale, m.unit, hi/m.scale, m.unit, m.get(last)/m.scale, m.unit,
			q2/m.scale, m.unit, q4/m.scale, m.unit, 100*(q4-q2)/q2)
	}
	fmt.Fprintf(&b, "\n- ops: %.0f recorded, %.0f ok (%.2f%%), %.0f failure counts\n", last.ops, last.ok, 100*last.ok/math.Max(last.ops, 1), last.failures)
	fmt.Fprintf(&b, "- failures by cause:")
	for _, c := range probes.Causes {
		if v := last.byCause[string(c)]; v > 0 {
			fmt.Fprintf(&b, " %s %.0f,", c, v)
		}
	}
	fmt.Fprintf(&b, "\n\n| backend | ops | ok | failures by cause |\n|---|---|---|---|\n")
	backends := make([]string, 0, len(last.opsBy))
	for k := range last.opsBy {
		backends = append(backends, k)
	}
	sort.Strings(backends)
	for _, be := range backends {
		var causes []string
		for _, c := range probes.Causes {
			if v := last.failBy[be+" "+string(c)]; v > 0 {
				causes = append(causes, fmt.Sprintf("%s %.0f", c, v))
			}
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f (%.2f%%) | %s |\n", be, last.opsBy[be], last.okBy[be], 100*last.okBy[be]/math.Max(last.opsBy[be], 1), strings.Join(causes, ", "))
	}
	fmt.Fprintf(&b, "\n## Fault windows\n\n| window | start | end | ops failed during it |\n|---|---|---|---|\n")
	for _, w := range windows {
		var before, after float64
		for _, s := range samples {
			if s.elapsed <= w.start {
				before = s.failures
			}
			if s.elapsed <= w.end+interval || w.end == 0 {
				after = s.failures
			}
		}
		end := w.end.Round(time.Second).String()
		if w.end == 0 {
			end = "end of run"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f |\n", w.name, w.start.Round(time.Second), end, after-before)
	}
	return b.String()
}
