//go:build integration

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/test/stack"
)

// The series budget of issue #24 (docs/sizing.md).
const (
	maxSeriesPerOp  = 25
	maxSeriesOfDemo = 1000
)

// TestSeriesBudget runs the real daemon (bin built from this tree) on the
// demo's config (deploy/local/dbcanary.yaml: one target per backend, every
// backend's default ops but RabbitMQ's, which the demo lists, plus the noop
// engine-overhead target) against the real servers, waits until every
// scheduled op has succeeded once (so every series a healthy op creates
// exists), and counts the series of one text scrape: what a Prometheus
// without native histograms stores. Per op, the phase histograms are counted
// apart (the 153 per op counted the op's own series).
func TestSeriesBudget(t *testing.T) {
	root := stack.RepoRoot()
	dir := t.TempDir()
	bin := filepath.Join(dir, "dbcanary")
	build := exec.Command("nice", "go", "build", "-o", bin, "./cmd/dbcanary")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg, err := os.ReadFile(filepath.Join(root, "deploy", "local", "dbcanary.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Its own ledger state; everything else as shipped.
	re := regexp.MustCompile(`(?m)^(\s*state_dir:).*$`)
	if !re.Match(cfg) {
		t.Fatal("the demo config has no state_dir line to point at a test directory")
	}
	cfg = re.ReplaceAll(cfg, []byte("${1} "+filepath.Join(dir, "state")))
	// The servers of this stack, wherever its scripts put them (a private
	// stack has other ports than the demo's defaults).
	for _, r := range []struct{ from, to string }{
		{"amqp://127.0.0.1:5672/", rmq.Get(t, "DBCANARY_TEST_RABBITMQ_URL")},
		{"port: 9042", "port: " + cas.Get(t, "DBCANARY_TEST_CASSANDRA_PORT")},
		{"http://127.0.0.1:9200", ops.Get(t, "DBCANARY_TEST_OPENSEARCH_URL")},
		{"http://127.0.0.1:9000", "http://" + s3.Get(t, "DBCANARY_TEST_S3_ENDPOINT")},
	} {
		if !bytes.Contains(cfg, []byte(r.from)) {
			t.Fatalf("the demo config has no %q to point at this stack", r.from)
		}
		cfg = bytes.ReplaceAll(cfg, []byte(r.from), []byte(r.to))
	}
	cfgPath := filepath.Join(dir, "dbcanary.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	secret := func(key string) string {
		b, err := os.ReadFile(key)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	d := exec.CommandContext(ctx, bin, "run", "--config.file", cfgPath, "--web.listen-address", addr)
	d.Env = append(os.Environ(),
		// A namespace of its own: another daemon on this host (make demo)
		// would otherwise share the host name as its instance id.
		fmt.Sprintf("DBCANARY_INSTANCE_ID=series-%d", time.Now().UnixNano()),
		"DBCANARY_RABBITMQ_PASSWORD="+secret(rmq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE")),
		"DBCANARY_CASSANDRA_PASSWORD="+secret(cas.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE")),
		"DBCANARY_S3_ACCESS_KEY_ID="+secret(s3.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE")),
		"DBCANARY_S3_SECRET_ACCESS_KEY="+secret(s3.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE")))
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	d.Stdout, d.Stderr = logf, logf
	d.Cancel = func() error { return d.Process.Signal(os.Interrupt) }
	d.WaitDelay = 30 * time.Second
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = d.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("daemon log (tail):\n%s", tail(string(b), 4000))
			}
		}
	})

	var s scrape
	waitFor(t, 5*time.Minute, "every scheduled op of the demo config has succeeded once", func() (bool, string) {
		var err error
		if s, err = scrapeSeries("http://" + addr + "/metrics"); err != nil {
			return false, err.Error()
		}
		if missing := s.notYetSucceeded(); len(missing) > 0 || len(s.expected()) == 0 {
			return false, fmt.Sprintf("no success yet: %v", missing)
		}
		return true, ""
	})

	total := len(s.lines)
	var rows []string
	var worst int
	for _, k := range s.ops() {
		own, phases, fault := s.countOp(k)
		rows = append(rows, fmt.Sprintf("%s %s: %d (+%d phase series)", k.target, k.op, own, phases))
		if len(fault) > 0 {
			// A failure during the test (a loaded machine) adds its series;
			// the budget is that of a healthy op, so they are left out, and shown.
			t.Logf("%s %s: %d series of failures left out of the count: %v", k.target, k.op, len(fault), fault)
		}
		worst = max(worst, own)
		if own > maxSeriesPerOp {
			t.Errorf("%s %s %s: %d series, budget %d:\n%s", k.backend, k.target, k.op, own, maxSeriesPerOp, strings.Join(s.opLines(k), "\n"))
		}
	}
	t.Logf("series per op (text scrape):\n%s", strings.Join(rows, "\n"))
	stack.Figure(t, "demo config: %d series in one text scrape (budget %d), %d ops, at most %d per op (budget %d)", total, maxSeriesOfDemo, len(s.ops()), worst, maxSeriesPerOp)
	if total > maxSeriesOfDemo {
		t.Errorf("the demo config exports %d series, budget %d", total, maxSeriesOfDemo)
	}
}

func freeAddr(t *testing.T) string { t.Helper(); return stack.FreeAddr(t) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// scrape is one text-format scrape, one entry per series line.
type scrape struct{ lines []series }

type series struct {
	name   string
	labels map[string]string
	value  string
	raw    string
}

type opKey struct{ backend, target, op string }

var (
	seriesRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func scrapeSeries(url string) (scrape, error) {
	resp, err := http.Get(url)
	if err != nil {
		return scrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return scrape{}, err
	}
	var s scrape
	for _, l := range strings.Split(string(body), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := seriesRE.FindStringSubmatch(l)
		if m == nil {
			return scrape{}, fmt.Errorf("unparsed line %q", l)
		}
		x := series{name: m[1], labels: map[string]string{}, value: m[3], raw: l}
		for _, lm := range labelRE.FindAllStringSubmatch(m[2], -1) {
			x.labels[lm[1]] = lm[2]
		}
		s.lines = append(s.lines, x)
	}
	return s, nil
}

// expected are the scheduled ops (expected rate above 0).
func (s scrape) expected() []opKey {
	var out []opKey
	for _, x := range s.lines {
		if x.name == "dbcanary_op_expected_rate" && x.value != "0" {
			out = append(out, opKey{x.labels["backend"], x.labels["target"], x.labels["op"]})
		}
	}
	return out
}

// notYetSucceeded are the scheduled ops without a success so far.
func (s scrape) notYetSucceeded() []string {
	ok := map[opKey]bool{}
	for _, x := range s.lines {
		if x.name == "dbcanary_last_success_timestamp_seconds" && x.value != "0" {
			ok[opKey{x.labels["backend"], x.labels["target"], x.labels["op"]}] = true
		}
	}
	var out []string
	for _, k := range s.expected() {
		if !ok[k] {
			out = append(out, k.target+"/"+k.op)
		}
	}
	return out
}

// ops are every (backend, target, op) with a series, sorted.
func (s scrape) ops() []opKey {
	seen := map[opKey]bool{}
	for _, x := range s.lines {
		if op, ok := x.labels["op"]; ok {
			seen[opKey{x.labels["backend"], x.labels["target"], op}] = true
		}
	}
	out := make([]opKey, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.target+"/"+a.op < b.target+"/"+b.op
	})
	return out
}

func (s scrape) of(k opKey) []series {
	var out []series
	for _, x := range s.lines {
		if x.labels["op"] == k.op && x.labels["target"] == k.target && x.labels["backend"] == k.backend {
			out = append(out, x)
		}
	}
	return out
}

func (s scrape) opLines(k opKey) []string {
	var out []string
	for _, x := range s.of(k) {
		out = append(out, x.raw)
	}
	return out
}

// countOp counts an op's own series and its phase series; fault lists the
// series only a failure creates (error latency and service time, a cause
// created on first use), which are not counted.
func (s scrape) countOp(k opKey) (own, phases int, fault []string) {
	eager := map[string]bool{}
	for _, c := range metrics.EagerCauses {
		eager[string(c)] = true
	}
	for _, x := range s.of(k) {
		switch {
		case x.labels["result"] == metrics.ResultError,
			x.name == "dbcanary_op_failures_total" && !eager[x.labels["cause"]]:
			fault = append(fault, x.raw)
		case strings.HasPrefix(x.name, "dbcanary_op_phase_seconds"):
			phases++
		default:
			own++
		}
	}
	slices.Sort(fault)
	return own, phases, fault
}
