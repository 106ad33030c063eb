//go:build boardpicture

package main

// TestBoardPicture makes docs/board-overview.png (`make board-picture`; not in
// make test): a real dbcanary daemon runs the demo config
// (deploy/local/dbcanary.yaml) against the local stores, a real Prometheus
// (Debian's, test/stack/prometheus.sh) scrapes it with the generated rules
// loaded, toxiproxy adds latency to OpenSearch for a few minutes, and
// boardshot draws the overview board from that Prometheus.
//
// Environment (all optional): BOARD_PICTURE_OUT (the PNG; default
// docs/board-overview.png), BOARD_PICTURE_WARMUP (5m: run before the drawn
// window, so connection set-up and the first 5m rate windows are not in it), BOARD_PICTURE_RANGE (13m: the
// drawn window), BOARD_PICTURE_FAULT_AT (4m into the window) and
// BOARD_PICTURE_FAULT_FOR (3m), BOARD_PICTURE_LATENCY (500ms),
// BOARD_PICTURE_OPEN (rows drawn open: Cassandra,OpenSearch),
// BOARD_PICTURE_PORTS (LO-HI: the ports of the servers it starts; default
// free ports), BOARD_PICTURE_PRIVATE (stores started privately on those
// ports instead of the shared stack's, e.g. minio when another MinIO holds
// :9000).

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/test/stack"
)

func TestBoardPicture(t *testing.T) {
	s := pictureSettings(t)
	root := stack.RepoRoot()
	dir := filepath.Join(stack.DataDir()+"-boardshot", "picture")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	linkBin(t, filepath.Dir(dir))
	ports := newPorts(t, os.Getenv("BOARD_PICTURE_PORTS"))
	stores := startStores(t, filepath.Dir(dir), ports, s.private)

	toxi := stack.StartPrivate(t, "toxiproxy", filepath.Dir(dir), "DBCANARY_TOXIPROXY_PORT="+strconv.Itoa(ports.next(t)))
	tc := toxiproxy.NewClient(toxi.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	upstream := strings.TrimPrefix(stores["opensearch"].Get(t, "DBCANARY_TEST_OPENSEARCH_URL"), "http://")
	proxy, err := tc.CreateProxy("boardshot-opensearch", "127.0.0.1:"+strconv.Itoa(ports.next(t)), upstream)
	if err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}

	daemonAddr := "127.0.0.1:" + strconv.Itoa(ports.next(t))
	// A ledger left by an earlier run would re-read writes this run's stores never saw.
	if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "dbcanary.yaml")
	cfg := demoConfig(t, root, dir, stores, proxy.Listen)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promURL := startPrometheus(t, root, filepath.Dir(dir), ports.next(t), daemonAddr)
	bin, remove := stack.MustBuild("dbcanary-boardshot-bin-", "-trimpath")
	t.Cleanup(remove)
	stack.StartDaemon(t, bin, cfgPath, stack.DaemonOptions{
		Args: []string{"--web.listen-address", daemonAddr}, Env: demoEnv(t, stores), NoWait: true})
	waitReady(t, daemonAddr)
	start := time.Now()
	t.Logf("daemon on %s, Prometheus on %s; the drawn window is %s after %s of warm-up", daemonAddr, promURL, s.rng, s.warmup)

	windowStart := start.Add(s.warmup)
	faultFrom := windowStart.Add(s.faultAt)
	waitUntil(t, faultFrom, daemonAddr, promURL)
	toxic := map[string]any{"latency": s.latency.Milliseconds(), "jitter": s.latency.Milliseconds() / 5}
	if _, err := proxy.AddToxic("latency", "latency", "downstream", 1, toxic); err != nil {
		t.Fatalf("toxiproxy latency: %v", err)
	}
	faultFrom = time.Now()
	waitUntil(t, faultFrom.Add(s.faultFor), daemonAddr, promURL)
	if err := proxy.RemoveToxic("latency"); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	faultTo := time.Now()
	end := windowStart.Add(s.rng)
	waitUntil(t, end, daemonAddr, promURL)
	whose := "the local stack"
	if len(s.private) > 0 {
		whose = "stores of its own"
	}
	note := fmt.Sprintf("dbcanary ran the demo config against %s; toxiproxy added %s (±%s) to OpenSearch's responses %s–%s UTC.",
		whose, s.latency, s.latency/5, faultFrom.UTC().Format("15:04"), faultTo.UTC().Format("15:04"))
	shootPictures(t, s, promURL, end, note)
	figures(t, promURL, windowStart, faultFrom, faultTo, end)
}

// settings are TestBoardPicture's environment, parsed.
type settings struct {
	out                            string
	warmup, rng, faultAt, faultFor time.Duration
	latency                        time.Duration
	open, private                  []string
	fullBoard                      string // the whole board, every row open: an artefact
}

func pictureSettings(t *testing.T) settings {
	t.Helper()
	dur := func(name string, def time.Duration) time.Duration {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 5m", name, v)
		}
		return d
	}
	list := func(name, def string) []string {
		v := os.Getenv(name)
		if v == "" {
			v = def
		}
		return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
	}
	s := settings{
		out:    os.Getenv("BOARD_PICTURE_OUT"),
		warmup: dur("BOARD_PICTURE_WARMUP", 5*time.Minute), rng: dur("BOARD_PICTURE_RANGE", 13*time.Minute),
		faultAt: dur("BOARD_PICTURE_FAULT_AT", 4*time.Minute), faultFor: dur("BOARD_PICTURE_FAULT_FOR", 3*time.Minute),
		latency: dur("BOARD_PICTURE_LATENCY", 500*time.Millisecond),
		open:    list("BOARD_PICTURE_OPEN", "Cassandra,OpenSearch"), private: list("BOARD_PICTURE_PRIVATE", ""),
	}
	if s.out == "" {
		s.out = filepath.Join(stack.RepoRoot(), "docs", "board-overview.png")
	}
	if s.faultAt+s.faultFor > s.rng {
		t.Fatalf("the fault (%s + %s) ends after the drawn window (%s)", s.faultAt, s.faultFor, s.rng)
	}
	s.fullBoard = filepath.Join(stack.MustArtefactDir("boardshot"), "board-overview-full.png")
	return s
}

// linkBin shares the default stack's built binaries (toxiproxy) with the
// tool's own stack directory, as make's pages-stack does.
func linkBin(t *testing.T, dir string) {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if _, err := os.Lstat(bin); err == nil {
		return
	}
	if err := os.MkdirAll(filepath.Join(stack.DataDir(), "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(stack.DataDir(), "bin"), bin); err != nil {
		t.Fatal(err)
	}
}

// ports hands out the ports of the servers the tool starts: from LO-HI when
// given (each checked free), else stack.FreePort.
type ports struct{ lo, hi, nextPort int }

func newPorts(t *testing.T, spec string) *ports {
	t.Helper()
	if spec == "" {
		return &ports{}
	}
	lo, hi, ok := strings.Cut(spec, "-")
	a, errA := strconv.Atoi(lo)
	b, errB := strconv.Atoi(hi)
	if !ok || errA != nil || errB != nil || a < 1024 || b < a || b > 65535 {
		t.Fatalf("BOARD_PICTURE_PORTS=%q: want LO-HI, e.g. 19380-19399", spec)
	}
	return &ports{lo: a, hi: b, nextPort: a}
}

func (p *ports) next(t *testing.T) int {
	t.Helper()
	if p.lo == 0 {
		return stack.FreePort(t)
	}
	for ; p.nextPort <= p.hi; p.nextPort++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.nextPort)))
		if err == nil {
			_ = l.Close()
			p.nextPort++
			return p.nextPort - 1
		}
	}
	t.Fatalf("BOARD_PICTURE_PORTS %d-%d: no free port left", p.lo, p.hi)
	return 0
}

// privatePorts are the settings giving a store of the tool's own its ports.
var privatePorts = map[string][]string{
	"minio":      {"DBCANARY_MINIO_PORT", "DBCANARY_MINIO_CONSOLE_PORT"},
	"rabbitmq":   {"DBCANARY_RABBITMQ_PORT", "DBCANARY_RABBITMQ_DIST_PORT"},
	"cassandra":  {"DBCANARY_CASSANDRA_PORT", "DBCANARY_CASSANDRA_STORAGE_PORT"},
	"opensearch": {"DBCANARY_OPENSEARCH_PORT", "DBCANARY_OPENSEARCH_TRANSPORT_PORT"},
}

// startStores starts the demo's four stores: the shared stack's, or the
// tool's own for those listed in private.
func startStores(t *testing.T, dir string, p *ports, private []string) map[string]stack.Env {
	t.Helper()
	own := map[string]bool{}
	for _, s := range private {
		if privatePorts[s] == nil {
			t.Fatalf("BOARD_PICTURE_PRIVATE: %q is not one of minio, rabbitmq, cassandra, opensearch", s)
		}
		own[s] = true
	}
	stores := map[string]stack.Env{}
	for _, s := range []string{"rabbitmq", "cassandra", "opensearch", "minio"} {
		if !own[s] {
			env, err := stack.Start(s)
			if err != nil {
				t.Fatalf("%v (BOARD_PICTURE_PRIVATE=%s starts one of the tool's own)", err, s)
			}
			stores[s] = env
			continue
		}
		var env []string
		for _, name := range privatePorts[s] {
			env = append(env, name+"="+strconv.Itoa(p.next(t)))
		}
		if s == "rabbitmq" {
			env = append(env, "DBCANARY_RABBITMQ_NODENAME=dbcanary-boardshot@localhost")
		}
		stores[s] = stack.StartPrivate(t, s, dir, env...)
	}
	t.Cleanup(stack.Cleanup)
	return stores
}

// demoConfig is deploy/local/dbcanary.yaml with the addresses of these
// stores, OpenSearch through the fault proxy, and a state directory of the
// tool's own. Each replaced text must occur once: a changed demo config
// fails here rather than drawing something else.
func demoConfig(t *testing.T, root, dir string, stores map[string]stack.Env, osProxy string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "local", "dbcanary.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for _, r := range [][2]string{
		{"state_dir: /var/tmp/dbcanary-stack/demo-state", "state_dir: " + filepath.Join(dir, "state")},
		{"url: amqp://127.0.0.1:5672/", "url: " + stores["rabbitmq"].Get(t, "DBCANARY_TEST_RABBITMQ_URL")},
		{"port: 9042", "port: " + stores["cassandra"].Get(t, "DBCANARY_TEST_CASSANDRA_PORT")},
		{"addresses: [http://127.0.0.1:9200]", "addresses: [http://" + osProxy + "]"},
		{"endpoint: http://127.0.0.1:9000", "endpoint: http://" + stores["minio"].Get(t, "DBCANARY_TEST_S3_ENDPOINT")},
	} {
		if n := strings.Count(cfg, r[0]); n != 1 {
			t.Fatalf("deploy/local/dbcanary.yaml: %q occurs %d times, want once (update boardshot's demoConfig)", r[0], n)
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return cfg
}

// demoEnv gives the demo config its secrets from the stores' credential
// files, as test/stack/demo-env.sh does for make demo.
func demoEnv(t *testing.T, stores map[string]stack.Env) []string {
	t.Helper()
	env := os.Environ()
	for name, src := range map[string][2]string{
		"DBCANARY_RABBITMQ_PASSWORD":    {"rabbitmq", "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"},
		"DBCANARY_CASSANDRA_PASSWORD":   {"cassandra", "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"},
		"DBCANARY_S3_ACCESS_KEY_ID":     {"minio", "DBCANARY_TEST_S3_ACCESS_KEY_FILE"},
		"DBCANARY_S3_SECRET_ACCESS_KEY": {"minio", "DBCANARY_TEST_S3_SECRET_KEY_FILE"},
	} {
		b, err := os.ReadFile(stores[src[0]].Get(t, src[1]))
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, name+"="+strings.TrimSpace(string(b)))
	}
	return env
}

// startPrometheus starts Debian's Prometheus (test/stack/prometheus.sh) of
// the tool's own, scraping the daemon every 15 s (the shipped rules' finest
// interval) with the generated rules, unchanged, loaded.
func startPrometheus(t *testing.T, root, dir string, port int, daemon string) string {
	t.Helper()
	cfg := fmt.Sprintf(`global: {scrape_interval: 15s, scrape_timeout: 10s, evaluation_interval: 15s}
rule_files: [%q]
scrape_configs:
  - job_name: dbcanary
    static_configs: [{targets: [%q]}]
`, filepath.Join(root, "alerts", "dbcanary-rules.yml"), daemon)
	path := filepath.Join(dir, "picture", "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	env := stack.StartPrivate(t, "prometheus", dir, "DBCANARY_PROMETHEUS_PORT="+strconv.Itoa(port), "DBCANARY_PROMETHEUS_CONFIG="+path)
	return env.Get(t, "DBCANARY_TEST_PROMETHEUS_URL")
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	enginetest.WaitFor(t, 90*time.Second, "dbcanary ready on "+addr, func() bool {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// waitUntil lets the daemon run until when, checking every 30 s that it
// still answers and that Prometheus still scrapes it.
func waitUntil(t *testing.T, when time.Time, daemon, prom string) {
	t.Helper()
	for time.Now().Before(when) {
		select {
		case <-t.Context().Done():
			t.Fatal("stopped")
		case <-time.After(min(30*time.Second, time.Until(when))):
		}
		if resp, err := http.Get("http://" + daemon + "/-/healthy"); err != nil {
			t.Fatalf("dbcanary stopped answering: %v", err)
		} else {
			resp.Body.Close()
		}
		if v, err := instant(prom, `up{job="dbcanary"}`, time.Now()); err != nil || v != 1 {
			t.Logf("Prometheus: up{job=\"dbcanary\"} = %v (%v)", v, err)
		}
	}
}

// instant runs a PromQL query returning one value at ts.
func instant(prom, q string, ts time.Time) (float64, error) {
	u := prom + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(ts.Unix(), 10)}}.Encode()
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if len(body.Data.Result) != 1 {
		return 0, fmt.Errorf("%s: %d series, want 1", q, len(body.Data.Result))
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// shootPictures draws the picture (the rows in s.open) and, as an artefact,
// the whole board; every panel must be drawn or say "no data".
func shootPictures(t *testing.T, s settings, prom string, end time.Time, note string) {
	t.Helper()
	uplot, err := stack.Tool("uplot", "install")
	if err != nil {
		t.Fatal(err, uplot)
	}
	dist, err := stack.Tool("uplot", "path")
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, r := range s.open {
		open[r] = true
	}
	for _, shot := range []struct {
		out  string
		open map[string]bool
	}{{s.out, open}, {s.fullBoard, nil}} {
		rs, err := Shoot(Options{
			Plan: PlanOptions{Path: filepath.Join(stack.RepoRoot(), "dashboards", "dbcanary-overview.json"),
				Width: 1000, End: end, Range: s.rng, MinStep: 15 * time.Second, Open: shot.open},
			Prometheus: prom, Out: shot.out, Listen: "127.0.0.1:0", Chromium: stack.MustTool("chromium"),
			UPlot: strings.TrimSpace(dist), Note: note,
		})
		if err != nil {
			t.Fatalf("boardshot %s: %v", shot.out, err)
		}
		t.Logf("%s:\n%s", shot.out, summary(rs))
		for _, r := range rs {
			if r.State != "drawn" && r.State != "no data" {
				t.Errorf("panel %q: %s", r.Title, r.State)
			}
		}
	}
}

// figures prints what the picture should show: OpenSearch's worst p99 /
// baseline before, during and after the injected latency.
func figures(t *testing.T, prom string, from, faultFrom, faultTo, end time.Time) {
	t.Helper()
	q := `max(max_over_time((target_op:dbcanary_op_latency_seconds:quantile_rate5m{backend="opensearch",quantile="0.99",op=~"index|get"}
  / on (backend, op, quantile) group_left () backend_op:dbcanary_op_latency_seconds:baseline{backend="opensearch",use="alert"})[%ds:15s]))`
	for _, w := range []struct {
		what     string
		from, to time.Time
	}{{"before the fault", from, faultFrom}, {"fault and 5m after", faultFrom, faultTo.Add(5 * time.Minute)}} {
		to := w.to
		if to.After(end) {
			to = end
		}
		v, err := instant(prom, fmt.Sprintf(q, int(to.Sub(w.from).Seconds())), to)
		stack.Figure(t, "OpenSearch index/get p99 / baseline p99, max %s (%s–%s UTC): %.2fx (%v)",
			w.what, w.from.UTC().Format("15:04"), to.UTC().Format("15:04"), v, err)
	}
}
