//go:build integration

package clusters

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/pager"
	"github.com/dbcanary/dbcanary/test/stack"
)

// startPrivate is stack.StartPrivate.
func startPrivate(t *testing.T, script, dir string, env ...string) stack.Env {
	t.Helper()
	return stack.StartPrivate(t, script, dir, env...)
}

// daemon is `dbcanary run` on a config of the test.
type daemon struct {
	addr string
	logs *stack.Log
}

// startDaemon runs `dbcanary run` on cfg until the test ends and waits
// until it is ready; the daemon's log is printed if the test failed.
func startDaemon(t *testing.T, cfg string) *daemon {
	t.Helper()
	file := filepath.Join(t.TempDir(), "dbcanary.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	sd := stack.StartDaemon(t, binary, file, stack.DaemonOptions{})
	return &daemon{addr: sd.Addr, logs: sd.Log}
}

// snapshot is the daemon's op counters at one moment.
type snapshot struct {
	at time.Time
	// ok and failed count finished ops by op (histogram counts by result).
	ok, failed map[string]float64
	// okSum is the latency sum of the successful ops, by op (seconds).
	okSum map[string]float64
	// causes counts failures by "op/cause".
	causes map[string]float64
	up     float64
	// ledger counts ledger checks by result.
	ledger map[string]float64
}

// families scrapes the daemon's /metrics.
func (d *daemon) families(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// snap scrapes the daemon's /metrics for target.
func (d *daemon) snap(t *testing.T, target string) snapshot {
	t.Helper()
	fams := d.families(t)
	s := snapshot{at: time.Now(), ok: map[string]float64{}, failed: map[string]float64{}, okSum: map[string]float64{},
		causes: map[string]float64{}, ledger: map[string]float64{}}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	ours := func(m *dto.Metric) bool { return label(m, "target") == target }
	for _, m := range fams["dbcanary_op_latency_seconds"].GetMetric() {
		if !ours(m) {
			continue
		}
		h := m.GetHistogram()
		if label(m, "result") == "ok" {
			s.ok[label(m, "op")] += float64(h.GetSampleCount())
			s.okSum[label(m, "op")] += h.GetSampleSum()
		} else {
			s.failed[label(m, "op")] += float64(h.GetSampleCount())
		}
	}
	for _, m := range fams["dbcanary_op_failures_total"].GetMetric() {
		if ours(m) && m.GetCounter().GetValue() > 0 {
			s.causes[label(m, "op")+"/"+label(m, "cause")] += m.GetCounter().GetValue()
		}
	}
	for _, m := range fams["dbcanary_target_up"].GetMetric() {
		if ours(m) {
			s.up = m.GetGauge().GetValue()
		}
	}
	for _, m := range fams["dbcanary_ledger_checks_total"].GetMetric() {
		if ours(m) {
			s.ledger[label(m, "result")] += m.GetCounter().GetValue()
		}
	}
	return s
}

// diff is what happened between two snapshots, by key, zeros left out.
func diff(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// waitOK waits until every op in ops has n more successes than in from and
// returns the snapshot that shows it.
func (d *daemon) waitOK(t *testing.T, target string, from snapshot, ops []string, n float64, timeout time.Duration, what string) snapshot {
	t.Helper()
	var s snapshot
	enginetest.WaitFor(t, timeout, what, func() bool {
		s = d.snap(t, target)
		for _, op := range ops {
			if s.ok[op]-from.ok[op] < n {
				return false
			}
		}
		return true
	})
	return s
}

// meanOK is the mean latency of the ops that succeeded between two snapshots.
func meanOK(before, after snapshot, op string) time.Duration {
	n := after.ok[op] - before.ok[op]
	if n <= 0 {
		return 0
	}
	return time.Duration((after.okSum[op] - before.okSum[op]) / n * float64(time.Second))
}

// alerting is a Prometheus of the test's own (own directory and port, started
// by test/stack/prometheus.sh, stopped by PID) that scrapes the daemon every
// second and evaluates the generated rules, scaled by 0.05 (a `for: 2m`
// becomes 6s, a 5m window 15s, 1h 3m), as probes/cassandra's ledger proof does.
type alerting struct {
	promURL string
	hook    *pager.Webhook // the shipped Alertmanager's receivers post here (pager_test.go)
}

func startAlerting(t *testing.T, daemonAddr string) *alerting {
	t.Helper()
	b, err := baseline.Load(filepath.Join(stack.RepoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate.RuleFiles(b, generate.Options{TimeScale: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	a := pager.StartAlerting(t, pager.AlertingOptions{Dir: t.TempDir(), Targets: []string{daemonAddr}, Job: b.Policy.Job,
		Rules: files["dbcanary-rules.yml"], Scrape: time.Second, Scale: amScale, MinWait: amMinWait})
	return &alerting{promURL: a.PromURL, hook: a.Hook}
}

// query runs an instant query and returns the label sets of the result (nil
// while Prometheus is not up).
func (a *alerting) query(t *testing.T, expr string) []map[string]string {
	t.Helper()
	resp, err := http.Get(a.promURL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("query %q: %s", expr, body)
	}
	out := make([]map[string]string, 0, len(r.Data.Result))
	for _, s := range r.Data.Result {
		out = append(out, s.Metric)
	}
	return out
}

// firedSince names the alerts of a severity that were firing at any
// evaluation since t0 ("DbcanaryTargetDown{target=x}"), sorted.
func (a *alerting) firedSince(t *testing.T, severity string, t0 time.Time) []string {
	t.Helper()
	secs := int(time.Since(t0).Seconds()) + 2
	seen := map[string]bool{}
	for _, m := range a.query(t, fmt.Sprintf(`max_over_time(ALERTS{alertstate="firing",severity=%q}[%ds])`, severity, secs)) {
		seen[alertName(m)] = true
	}
	return sorted(seen)
}

// firing names the alerts of a severity firing now.
func (a *alerting) firing(t *testing.T, severity string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range a.query(t, fmt.Sprintf(`ALERTS{alertstate="firing",severity=%q}`, severity)) {
		seen[alertName(m)] = true
	}
	return sorted(seen)
}

// minus is the alerts of a that are not in b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// inhibitedByTargetDown are the alerts alerts/alertmanager.yml inhibits
// while DbcanaryTargetDown fires for the same target: the operator is not
// paged for them then.
var inhibitedByTargetDown = []string{"DbcanaryErrorRatioHigh", "DbcanaryErrorBudgetBurn", "DbcanaryCanaryStale", "DbcanaryStoreMajorityDown",
	"DbcanaryLatencyAboveBaseline", "DbcanaryBacklog", "DbcanaryLatencyDrift"}

// pages is what reaches the pager of the alerts in crit once the shipped
// inhibition by DbcanaryTargetDown{target} is applied.
func pages(crit []string, target string) []string {
	if !slices.Contains(crit, "DbcanaryTargetDown{target="+target+"}") {
		return crit
	}
	var out []string
	for _, a := range crit {
		name, _, _ := strings.Cut(a, "{")
		if !slices.Contains(inhibitedByTargetDown, name) || !strings.Contains(a, "target="+target) {
			out = append(out, a)
		}
	}
	return out
}

func alertName(m map[string]string) string {
	name := m["alertname"]
	if m["alertname"] == "" {
		name = m["__name__"]
	}
	var extra []string
	for _, k := range []string{"target", "op", "cause", "quantile"} {
		if m[k] != "" {
			extra = append(extra, k+"="+m[k])
		}
	}
	return name + "{" + strings.Join(extra, ",") + "}"
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// waitScraped waits until Prometheus holds the target's up series.
func (a *alerting) waitScraped(t *testing.T, target string) {
	t.Helper()
	enginetest.WaitFor(t, 60*time.Second, "Prometheus to scrape the daemon", func() bool {
		return len(a.query(t, fmt.Sprintf(`dbcanary_target_up{target=%q}`, target))) > 0
	})
}

// useCluster starts a cluster with test/stack/<script>.sh unless it runs (it
// is stopped when the package's tests end if this process started it) and
// returns its env.
func useCluster(t *testing.T, script string) stack.Env {
	t.Helper()
	if script == "rabbitmq-cluster" {
		rabbitmqClusterTLS(t) // AMQPS beside AMQP on every node
	}
	env, err := stack.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// clusterNode is one node of a cluster started by a *-cluster.sh script.
type clusterNode struct {
	script string
	env    stack.Env
	// store is the env keys' infix: DBCANARY_TEST_<store>_NODE<i>_PIDFILE.
	store string
	i     int
}

func (n clusterNode) pid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(n.env.Get(t, fmt.Sprintf("DBCANARY_TEST_%s_NODE%d_PIDFILE", n.store, n.i)))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// kill9 kills the node with SIGKILL (no drain, no flush, no final commit log
// sync) and waits until it is gone.
func (n clusterNode) kill9(t *testing.T) {
	t.Helper()
	stack.Kill9(t, n.pid(t), fmt.Sprintf("node %d", n.i))
}

// restartCluster starts every node that is not running (the script is
// idempotent), with the DBCANARY_* settings in env, and returns how long it took.
func restartCluster(t *testing.T, script string, env ...string) time.Duration {
	t.Helper()
	t0 := time.Now()
	clusterScript(t, script, env, "start")
	return time.Since(t0)
}

// clusterScript runs test/stack/<script>.sh with args and the settings in env.
func clusterScript(t *testing.T, script string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(stack.Dir(), script+".sh")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s.sh %v: %v\n%s", script, args, err, out)
	}
}

// pageRow records one node fault's row of the page-quality table
// (docs/page-quality.md, "Node faults on 3-node clusters"): the critical
// alerts of target that fired since t0 and were not already firing before
// (pre), the warnings (tickets), and the pages: what the real Alertmanager
// running the shipped routing and inhibition (pager_test.go) sent to the
// pager for the target since t0. It waits until every page of want has
// arrived (up to 90 s), then watches 10 s more for any other, and fails the
// test unless the pages are exactly want ("one fault, one page"; none for a
// fault the cluster tolerates). The row is printed and, under make
// test-compat-clusters, appended to $CLUSTERS_TABLE_OUT.
func (a *alerting) pageRow(t *testing.T, backend, target, fault, expected string, t0 time.Time, pre, want []string) {
	t.Helper()
	mine := func(alerts []string) []string {
		var out []string
		for _, x := range alerts {
			if strings.Contains(x, "target="+target) {
				out = append(out, x)
			}
		}
		return out
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		got := pagesSince(a.hook, t0, target)
		if len(minus(want, got)) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	// An alert firing now reaches the pager within an evaluation, the
	// resend and the scaled group_wait (about 4 s): 10 s shows any other page.
	quiet := time.Now().Add(10 * time.Second)
	for time.Now().Before(quiet) {
		time.Sleep(time.Second)
	}
	crit := mine(minus(a.firedSince(t, "critical", t0), pre))
	warn := mine(a.firedSince(t, "warning", t0))
	got := pagesSince(a.hook, t0, target)
	var first string
	if len(got) > 0 {
		first = fmt.Sprintf(" (%s)", strings.Join(got, ", "))
	}
	result := "ok"
	if !sameSet(got, want) {
		result = fmt.Sprintf("**not as expected** (want %v)", want)
		t.Errorf("%s, %s: pages %v, want %v (one fault, one page); notifications since the fault: %v", backend, fault, got, want, notifiedSince(a.hook, t0, target))
	}
	dash := func(s []string) string {
		if len(s) == 0 {
			return "—"
		}
		return strings.Join(s, ", ")
	}
	row := fmt.Sprintf("| %s | %s | %s | %s | %s | %d%s | %s |", backend, fault, expected, dash(crit), dash(warn), len(got), first, result)
	t.Log(row)
	path := os.Getenv("CLUSTERS_TABLE_OUT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("clusters table: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, row); err != nil {
		t.Errorf("clusters table: %v", err)
	}
}

// startToxiproxy starts a toxiproxy of the test's own (free port, temp
// stack dir using the stack's binary, stopped when the test ends).
func startToxiproxy(t *testing.T) *toxiproxy.Client {
	t.Helper()
	if out, err := stack.Script("toxiproxy", "install"); err != nil {
		t.Fatalf("toxiproxy.sh install: %v\n%s", err, out)
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(stack.DataDir(), "bin"), filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	env := startPrivate(t, "toxiproxy", dir, fmt.Sprintf("DBCANARY_TOXIPROXY_PORT=%d", stack.FreePort(t)))
	return toxiproxy.NewClient(env.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
}

// waitTargetDown waits until DbcanaryTargetDown fires for target, then calls
// at; on timeout it fails with what the daemon saw since before (ops ok and
// failed, target_up, nodes), which tells a store that kept serving from a
// canary that stopped running ops.
func waitTargetDown(t *testing.T, al *alerting, d *daemon, target string, before snapshot, timeout time.Duration, at func()) {
	t.Helper()
	alert := "DbcanaryTargetDown{target=" + target + "}"
	deadline := time.Now().Add(timeout)
	for !slices.Contains(al.firing(t, "critical"), alert) {
		if time.Now().After(deadline) {
			now := d.snap(t, target)
			t.Fatalf("%s not firing after %s (critical alerts firing: %v); since the fault: ok %v, failed %v, dbcanary_target_up %v, dbcanary_store_node_up %v",
				alert, timeout, al.firing(t, "critical"), diff(before.ok, now.ok), diff(before.causes, now.causes), now.up, d.nodes(t, target))
		}
		time.Sleep(200 * time.Millisecond)
	}
	at()
}

// slowNodeShift measures one-target-per-node targets (names, node 3's last)
// with node 3 slowed: n successes of each op after before, none failing, and
// how far each target's mean latency rose over its healthy window (base to
// ref): the largest rise among shiftOps. It returns the rises, the snapshots
// after, and each op's means for the figure.
func slowNodeShift(t *testing.T, d *daemon, names, ops, shiftOps []string, n float64, base, ref, before map[string]snapshot) (map[string]time.Duration, map[string]snapshot, string) {
	t.Helper()
	shift, after := map[string]time.Duration{}, map[string]snapshot{}
	var figs []string
	for _, name := range names {
		a := d.waitOK(t, name, before[name], ops, n, 3*time.Minute, fmt.Sprintf("%s: %v successes of each op with node 3 slowed", name, n))
		after[name] = a
		if f := diff(before[name].causes, a.causes); len(f) > 0 {
			t.Errorf("%s: ops failed with node 3 slowed: %v", name, f)
		}
		for i, op := range shiftOps {
			if s := meanOK(before[name], a, op) - meanOK(base[name], ref[name], op); i == 0 || s > shift[name] {
				shift[name] = s
			}
		}
		for _, op := range ops {
			figs = append(figs, fmt.Sprintf("%s %s %s -> %s", name, op, meanOK(base[name], ref[name], op).Round(100*time.Microsecond), meanOK(before[name], a, op).Round(100*time.Microsecond)))
		}
	}
	return shift, after, strings.Join(figs, ", ")
}

// checkSlowNode: node 3's target (the last of names) carries at least half
// the added latency, the others at most a quarter of it.
func checkSlowNode(t *testing.T, names []string, shift map[string]time.Duration, added time.Duration, what string) {
	t.Helper()
	last := names[len(names)-1]
	if shift[last] < added/2 {
		t.Errorf("node 3's target: %s up %s, want at least half the added %s", what, shift[last], added)
	}
	for _, n := range names[:len(names)-1] {
		if shift[n] > added/4 {
			t.Errorf("%s: %s up %s with node 3 slowed by %s: the slow node is not told apart", n, what, shift[n], added)
		}
	}
}
