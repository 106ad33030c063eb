package web

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbcanary/dbcanary/internal/status"
	"github.com/dbcanary/dbcanary/probes"
)

func newStatusHandler(t testing.TB, st *status.Store) http.Handler {
	t.Helper()
	h, err := Handler(Options{Registry: prometheus.NewRegistry(), MetricsPath: "/metrics", Version: "test",
		Reload: func() error { return nil }, Logger: slog.New(slog.DiscardHandler), Status: st})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func do(t testing.TB, h http.Handler, method, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// demoStore has a failing, an ok and a not-yet-run target.
func demoStore() *status.Store { return demoStoreWith(nil) }

// demoStoreWith is demoStore showing the durability ledgers of ledgers.
func demoStoreWith(ledgers *probes.LedgerStore) *status.Store {
	st := status.New(status.Options{Ledgers: ledgers})
	st.SetDaemon(status.Daemon{Build: status.BuildInfo{Version: "9.9.9", Revision: "abc123", GoVersion: "go1.26"},
		InstanceID: "pod-7", ConfigFile: "/etc/dbcanary/dbcanary.yaml", Shard: status.Shard{Index: 1, Count: 3, Vantage: "zone-a"}})
	st.ConfigLoaded(nil)
	st.TargetStarted("mq-main", "rabbitmq", []string{"publish", "consume"}, "queue dbcanary.pod-7")
	st.TargetStarted("s3-main", "s3", []string{"put_1k"}, "bucket canary, prefix dbcanary/s3-main/pod-7/")
	st.TargetStarted("cass-new", "cassandra", []string{"insert"}, "keyspace dbcanary")
	now := time.Now()
	st.OpRecorded("s3-main", "s3", "put_1k", now, 12*time.Millisecond, "", nil)
	st.OpRecorded("mq-main", "rabbitmq", "publish", now.Add(-time.Minute), 2*time.Millisecond, "", nil)
	st.OpRecorded("mq-main", "rabbitmq", "consume", now, 3*time.Millisecond, "", nil)
	for range 3 {
		st.OpRecorded("mq-main", "rabbitmq", "publish", now, 0, probes.CauseRefused,
			probes.Fail(probes.CauseRefused, errors.New(`rabbitmq amqp://127.0.0.1:5672/: dial tcp 127.0.0.1:5672: connect: connection refused <script>alert(1)</script>`)))
	}
	return st
}

func TestStatusPage(t *testing.T) {
	h := newStatusHandler(t, demoStore())
	resp, body := do(t, h, http.MethodGet, "/")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<title>1 failing — dbcanary</title>`,
		`<meta http-equiv="refresh" content="15">`,
		`1 of 3 targets failing`,
		`9.9.9 (revision abc123), go1.26`,
		`pod-7`, `1 of 3 (targets split by rendezvous hashing); vantage zone-a`,
		`/etc/dbcanary/dbcanary.yaml: loaded`,
		`<h2>Why it is red</h2>`,
		`<a href="#t-mq-main">mq-main</a> publish: <span class="cause">refused</span>`,
		`queue dbcanary.pod-7`,
		`<span class="state failing">failing</span> <span class="cause">refused</span>`,
		`<span class="state not_yet_run">not yet run</span>`,
		`3 / 4 <span class="cause">refused 3</span>`,
		` ×3 <span class="cause">refused</span>`,
		`12.0 ms / 12.0 ms`,
		`connection refused &lt;script&gt;alert(1)&lt;/script&gt;`,
		`<a href="metrics">Metrics</a><a href="status.json">JSON</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("an error message was not escaped")
	}
	// Failing targets first, then not yet run, then ok.
	order := regexp.MustCompile(`<tbody class="target \w+" id="t-([^"]+)"`).FindAllStringSubmatch(body, -1)
	var names []string
	for _, m := range order {
		names = append(names, m[1])
	}
	if got := strings.Join(names, " "); got != "mq-main cass-new s3-main" {
		t.Errorf("row order %s", got)
	}
	// The CSP allows exactly the inline stylesheet the page carries, and nothing else loads.
	sum := sha256.Sum256([]byte(statusCSS))
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if !strings.Contains(body, "<style>"+statusCSS+"</style>") {
		t.Error("the stylesheet in the page differs from the one the CSP hash covers")
	}
	if regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).MatchString(body) {
		t.Error("the page refers to an external asset")
	}
}

func TestStatusPageRefreshAndMethods(t *testing.T) {
	h := newStatusHandler(t, demoStore())
	if _, body := do(t, h, http.MethodGet, "/?refresh=0"); strings.Contains(body, `http-equiv="refresh"`) {
		t.Error("refresh=0 still refreshes")
	}
	if _, body := do(t, h, http.MethodGet, "/?refresh=1"); !strings.Contains(body, `content="2"`) {
		t.Error("refresh=1 is not raised to 2 s")
	}
	if resp, _ := do(t, h, http.MethodGet, "/?refresh=soon"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("refresh=soon: %d", resp.StatusCode)
	}
	if resp, _ := do(t, h, http.MethodPost, "/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", resp.StatusCode)
	}
	if resp, body := do(t, h, http.MethodHead, "/"); resp.StatusCode != 200 || body != "" || resp.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD /: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do(t, h, http.MethodGet, "/nothing-here"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %d", resp.StatusCode)
	}
	// An empty store says so.
	if _, body := do(t, newStatusHandler(t, status.New(status.Options{})), http.MethodGet, "/"); !strings.Contains(body, "No targets") {
		t.Error("empty store: no 'No targets'")
	}
	// A rejected reload shows its reason and that the old config keeps running.
	st := demoStore()
	st.ConfigLoaded(errors.New(`targets[0].rabbitmq.url: must not contain credentials`))
	if _, body := do(t, newStatusHandler(t, st), http.MethodGet, "/"); !strings.Contains(body, "last reload rejected") ||
		!strings.Contains(body, "<code>targets[0].rabbitmq.url: must not contain credentials</code>") || !strings.Contains(body, "keeps running") {
		t.Error("rejected reload not shown")
	}
}

func TestStatusJSON(t *testing.T) {
	h := newStatusHandler(t, demoStore())
	resp, body := do(t, h, http.MethodGet, StatusJSONPath)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s = %d %s", StatusJSONPath, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var snap status.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Summary != (status.Summary{Targets: 3, OK: 1, Failing: 1, NotYetRun: 1}) || snap.Daemon.InstanceID != "pod-7" ||
		snap.FailureWindowSeconds != 600 || snap.LatencyWindowSeconds != 300 {
		t.Errorf("snapshot %+v", snap)
	}
	mq := snap.Targets[1] // sorted by name: cass-new, mq-main, s3-main
	pub := mq.Ops[0]
	if mq.Name != "mq-main" || mq.State != status.StateFailing || pub.State != status.StateFailing || pub.LastCause != probes.CauseRefused ||
		pub.Failures != 3 || len(pub.Errors) != 1 || pub.Errors[0].Count != 3 || !strings.Contains(pub.Errors[0].Message, "connection refused") {
		t.Errorf("mq-main %+v", mq)
	}
	// Keys scripts rely on, with their JSON names.
	for _, key := range []string{`"state":"failing"`, `"last_cause":"refused"`, `"p99_seconds":`, `"since":`, `"last_success":`,
		`"causes":[{"cause":"refused","count":3}]`, `"namespace":"queue dbcanary.pod-7"`, `"config_reload":{"success":true`} {
		if !strings.Contains(body, key) {
			t.Errorf("status.json lacks %s", key)
		}
	}
	if resp, _ := do(t, h, http.MethodDelete, StatusJSONPath); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
}

func TestLandingWithoutStatus(t *testing.T) {
	h, err := Handler(Options{Registry: prometheus.NewRegistry(), MetricsPath: "/metrics", Version: "test",
		Reload: func() error { return nil }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := do(t, h, http.MethodGet, "/"); resp.StatusCode != 200 || !strings.Contains(body, "dbcanary") {
		t.Errorf("landing: %d", resp.StatusCode)
	}
	if resp, _ := do(t, h, http.MethodGet, StatusJSONPath); resp.StatusCode == 200 {
		t.Error("status.json served without a store")
	}
}

func TestFormatting(t *testing.T) {
	for d, want := range map[time.Duration]string{
		999 * time.Nanosecond:    "1.00 µs",
		12345 * time.Nanosecond:  "12.3 µs",
		999700 * time.Nanosecond: "1000 µs",
		1500 * time.Microsecond:  "1.50 ms",
		250 * time.Millisecond:   "250 ms",
		2500 * time.Millisecond:  "2.50 s",
		90 * time.Second:         "90.0 s",
	} {
		if got := dur(d); got != want {
			t.Errorf("dur(%s) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		0: "just now", 5 * time.Second: "5s ago", 251 * time.Second: "4m11s ago",
		3*time.Hour + 5*time.Minute: "3h05m ago", 72 * time.Hour: "3d ago",
	} {
		if got := relative(d); got != want {
			t.Errorf("relative(%s) = %q, want %q", d, got, want)
		}
	}
}

// BenchmarkStatusPage renders the page for 1,000 noop targets, each with
// samples, and a tenth of them failing with a few distinct messages.
func BenchmarkStatusPage(b *testing.B) {
	st := status.New(status.Options{})
	st.SetDaemon(status.Daemon{Build: status.BuildInfo{Version: "bench", GoVersion: "go"}, InstanceID: "bench"})
	st.ConfigLoaded(nil)
	now := time.Now()
	for i := range 1000 {
		name := fmt.Sprintf("noop-%04d", i)
		st.TargetStarted(name, "noop", []string{"noop"}, "")
		for j := range 300 {
			st.OpRecorded(name, "noop", "noop", now.Add(time.Duration(j-300)*time.Second), time.Duration(50+j)*time.Microsecond, "", nil)
		}
		if i%10 == 0 {
			for j := range 5 {
				st.OpRecorded(name, "noop", "noop", now, 0, probes.CauseServer,
					probes.Fail(probes.CauseServer, fmt.Errorf("noop: injected failure %d", j)))
			}
		}
	}
	benchRender(b, newStatusHandler(b, st))
}

// TestStatusPageLedger: a target's durability ledger row says what it holds
// and what its checks found; a recent loss keeps the page red and is named
// in the summary even after the op is ok again.
func TestStatusPageLedger(t *testing.T) {
	ledgers := probes.NewLedgerStore("")
	st := demoStoreWith(ledgers)
	st.TargetStarted("cass-led", "cassandra", []string{"insert", probes.OpLedgerWrite, probes.OpLedgerCheck}, "keyspace dbcanary")
	now := time.Now()
	for _, o := range []string{"insert", probes.OpLedgerWrite, probes.OpLedgerCheck} {
		st.OpRecorded("cass-led", "cassandra", o, now, time.Millisecond, "", nil)
	}
	l := ledgers.Open(probes.LedgerOptions{Target: "cass-led", Backend: "cassandra", Instance: "pod-7", Ages: []time.Duration{time.Minute, 10 * time.Minute}})
	defer l.Close()
	acked := now.Add(-2 * time.Minute)
	for _, k := range []string{"k-ok", "k-<gone>"} {
		if err := l.Add(probes.LedgerEntry{Key: k, Where: "dbcanary.mixed_workload", Sum: probes.LedgerSum([]byte(k)), Acked: acked, Setting: "INSERT at ONE"}); err != nil {
			t.Fatal(err)
		}
	}
	h := newStatusHandler(t, st)
	_, body := do(t, h, http.MethodGet, "/")
	for _, want := range []string{
		`<tr class="ledger not_checked">`, `<span class="ledger-state not_checked">not yet checked</span>`,
		`2 acknowledged writes held, oldest 2m0`, `(at most 1000)`, `at 1m: 0 intact`, `Kept in memory (no global.state_dir)`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "write lost") || strings.Count(body, `<tr class="ledger`) != 1 {
		t.Error("a ledger row where no ledger runs (only cass-led has one), or a loss before any check")
	}
	due := l.Take(now, 4)
	if len(due) != 2 {
		t.Fatalf("due %+v", due)
	}
	if _, err := l.Record(due[0], probes.LedgerIntact); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record(due[1], probes.LedgerMissing); err != nil {
		t.Fatal(err)
	}
	_, body = do(t, h, http.MethodGet, "/")
	for _, want := range []string{
		`<tr class="ledger loss">`, `<span class="ledger-state loss">write lost</span>`,
		`at 1m: 1 intact <span class="cause">1 missing</span>`, `, <span class="ledger-age">at 10m: 0 intact</span>`,
		`<code>dbcanary.mixed_workload k-&lt;gone&gt;</code>`, `(INSERT at ONE), <span class="cause">missing</span> at the 1m check.`,
		`durability ledger: 1 target lost an acknowledged write in the last 10 min`, `write lost — dbcanary</title>`,
		`<a href="#t-cass-led">cass-led</a> durability ledger: <span class="cause">missing</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page after a loss lacks %q", want)
		}
	}
	if strings.Contains(body, "k-<gone>") {
		t.Error("a ledger key was not escaped")
	}
	// The target is shown red (its ops are ok) and first among the failing.
	if !strings.Contains(body, `<tbody class="target failing" id="t-cass-led">`) {
		t.Error("a target whose ledger lost a write is not shown red")
	}
	// The target's cells span its op rows and the ledger row.
	if !regexp.MustCompile(`<td class="tgt" rowspan="4">cass-led</td>`).MatchString(body) {
		t.Error("the target's cells do not span the ledger row")
	}
	_, js := do(t, h, http.MethodGet, StatusJSONPath)
	var snap status.Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil {
		t.Fatal(err)
	}
	for _, tg := range snap.Targets {
		switch {
		case tg.Name == "cass-led":
			if tg.Ledger == nil || tg.Ledger.Entries != 1 || tg.Ledger.Losses() != 1 || tg.Ledger.LastLoss == nil || tg.Ledger.LastLoss.Key != "k-<gone>" || !tg.Ledger.InMemory {
				t.Errorf("status.json ledger of cass-led: %+v", tg.Ledger)
			}
		case tg.Ledger != nil:
			t.Errorf("status.json: %s has a ledger", tg.Name)
		}
	}
	// Eleven minutes later the loss is out of the failure window: the row is
	// intact again (an entry was read back intact), the loss still named,
	// the page no longer red for it.
	later := status.New(status.Options{Ledgers: ledgers, Now: func() time.Time { return time.Now().Add(11 * time.Minute) }})
	later.TargetStarted("cass-led", "cassandra", []string{probes.OpLedgerWrite, probes.OpLedgerCheck}, "keyspace dbcanary")
	_, body = do(t, newStatusHandler(t, later), http.MethodGet, "/")
	if !strings.Contains(body, `<span class="ledger-state intact">intact</span>`) || !strings.Contains(body, `Last loss `) ||
		strings.Contains(body, "write lost") || strings.Contains(body, `<header class="red">`) {
		t.Error("a loss out of the failure window still makes the page red, or is no longer named")
	}
	for _, key := range []string{`"ledger":{"ages":["1m","10m"]`, `"checks":[{"age":"1m","intact":1,"missing":1,"corrupted":0}`, `"last_loss":{"at":`, `"in_memory":true`} {
		if !strings.Contains(js, key) {
			t.Errorf("status.json lacks %s", key)
		}
	}
}

// BenchmarkStatusPageLedgers renders 1,000 targets that each run a durability
// ledger (100 entries, checks at three ages, one in ten with a loss): the
// page with a ledger row per target.
func BenchmarkStatusPageLedgers(b *testing.B) {
	ledgers := probes.NewLedgerStore("")
	st := status.New(status.Options{Ledgers: ledgers})
	st.SetDaemon(status.Daemon{Build: status.BuildInfo{Version: "bench", GoVersion: "go"}, InstanceID: "bench"})
	st.ConfigLoaded(nil)
	now := time.Now()
	ops := []string{"put_4KiB", probes.OpLedgerWrite, probes.OpLedgerCheck}
	for i := range 1000 {
		name := fmt.Sprintf("s3-%04d", i)
		st.TargetStarted(name, "s3", ops, "s3://bench/dbcanary/"+name+"/bench/")
		for _, o := range ops {
			for j := range 100 {
				st.OpRecorded(name, "s3", o, now.Add(time.Duration(j-100)*time.Second), time.Duration(500+j)*time.Microsecond, "", nil)
			}
		}
		l := ledgers.Open(probes.LedgerOptions{Target: name, Backend: "s3", Instance: "bench"})
		b.Cleanup(func() { l.Close() })
		for j := range 100 {
			key := fmt.Sprintf("dbcanary/%s/bench/ledger/%016x", name, j)
			if err := l.Add(probes.LedgerEntry{Key: key, Where: "s3://bench", Sum: probes.LedgerSum([]byte(key)), Acked: now.Add(-2 * time.Hour), Setting: "PUT"}); err != nil {
				b.Fatal(err)
			}
		}
		for k, d := range l.Take(now, 10) {
			r := probes.LedgerIntact
			if i%10 == 0 && k == 0 {
				r = probes.LedgerMissing
			}
			if _, err := l.Record(d, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchRender(b, newStatusHandler(b, st))
}

// benchRender renders the page and its JSON, reporting their size.
func benchRender(b *testing.B, h http.Handler) {
	for name, path := range map[string]string{"html": "/", "json": StatusJSONPath} {
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}

// TestStatusPageNodes: a target whose driver knows the store's nodes shows
// them under its namespace, the down ones named first, and /status.json
// lists them; a node down does not make the target failing (its ops say).
func TestStatusPageNodes(t *testing.T) {
	st := demoStore()
	up := map[string]bool{"127.0.0.11:9042": true, "127.0.0.12:9042": false, "127.0.0.13:9042": true}
	st.TargetNodes("cass-new", func() iter.Seq2[string, bool] {
		return func(yield func(string, bool) bool) {
			for _, n := range []string{"127.0.0.13:9042", "127.0.0.12:9042", "127.0.0.11:9042"} {
				if !yield(n, up[n]) {
					return
				}
			}
		}
	})
	h := newStatusHandler(t, st)
	_, body := do(t, h, http.MethodGet, "/")
	want := `<div class="nodes down" title="127.0.0.12:9042, 127.0.0.11:9042, 127.0.0.13:9042">1 node down: <code>127.0.0.12:9042</code>; 2 of 3 up</div>`
	if !strings.Contains(body, want) {
		t.Errorf("page lacks %q", want)
	}
	if !strings.Contains(body, `1 of 3 targets failing`) {
		t.Error("a node down changed the targets' states")
	}
	_, js := do(t, h, http.MethodGet, "/status.json")
	if want := `"nodes":[{"node":"127.0.0.12:9042","up":false},{"node":"127.0.0.11:9042","up":true},{"node":"127.0.0.13:9042","up":true}]`; !strings.Contains(js, want) {
		t.Errorf("status.json lacks %s", want)
	}
	up["127.0.0.12:9042"] = true // read at each render
	_, body = do(t, h, http.MethodGet, "/")
	if want := `<div class="nodes" title="127.0.0.11:9042, 127.0.0.12:9042, 127.0.0.13:9042">3 nodes up</div>`; !strings.Contains(body, want) {
		t.Errorf("page lacks %q", want)
	}
	// A target without a node source shows none.
	if strings.Count(body, `class="nodes`) != 1 {
		t.Error("nodes shown for a target whose probe does not know them")
	}
}
