package generate

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// TestThresholdsOnBucketBounds: every latency threshold the rules carry is a
// classic bucket bound (histogram_quantile is exact there). Warnings (factor
// 1 × a documented p99) must sit within 25 % of the figure: more means
// the baseline's buckets lack a bound there (alerts/thresholds.md lists every shift).
func TestThresholdsOnBucketBounds(t *testing.T) {
	b := shippedBaseline(t)
	th, err := Thresholds(b)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	thresholdRE := regexp.MustCompile(`quantile="[0-9.]+"} > ([0-9.]+) and `)
	backendRE := regexp.MustCompile(`backend="([a-z0-9_]+)"`)
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != AlertLatencyAboveBaseline {
				continue
			}
			n++
			mm := thresholdRE.FindStringSubmatch(r.Expr)
			if mm == nil {
				t.Fatalf("no threshold in %q", r.Expr)
			}
			if !slices.ContainsFunc(metrics.LatencyBuckets, func(x float64) bool { return qs(x) == mm[1] }) {
				t.Errorf("%s: threshold %s is not a bucket bound", r.Expr, mm[1])
			}
			// ...and one the op's histogram exports in the default, compact layout.
			if !slices.ContainsFunc(metrics.Options{}.Bounds(backendRE.FindStringSubmatch(r.Expr)[1], r.Labels["op"], r.Labels["phase"]), func(x float64) bool { return qs(x) == mm[1] }) {
				t.Errorf("%s: threshold %s is not a classic bound of the op's compact histogram", r.Expr, mm[1])
			}
		}
	}
	if n != len(th) || n == 0 {
		t.Fatalf("%d latency rules for %d thresholds", n, len(th))
	}
	// The shipped thresholds, also those left out at the default timeout,
	// are all classic bounds of the compact layout (metrics.ThresholdBounds).
	skipped, _ := SkippedThresholds(b)
	for _, x := range append(th, skipped...) {
		if x.NeedsFull {
			t.Errorf("%s %s %s %s: bound %gs is not in metrics.ThresholdBounds[%q]", x.Backend, x.Op, x.Phase, x.Severity, x.Bound, strings.Trim(x.Backend+"/"+x.Op+"/"+x.Phase, "/"))
		}
	}
	for _, x := range th {
		if x.Severity == "warning" && (x.Shift() > 0.25 || x.Shift() < -b.SnapTolerance) {
			t.Errorf("%s %s %s: warning bound %gs is %+.0f %% from %gs: a bucket bound is missing", x.Backend, x.Op, x.Phase, x.Bound, x.Shift()*100, x.Raw)
		}
		if x.Shift() > 0.25 {
			t.Logf("bound missing near %gs: %s %s %s %s snaps to %gs (%+.0f %%)", x.Raw, x.Backend, x.Op, x.Phase, x.Severity, x.Bound, x.Shift()*100)
		}
	}
}

func TestSnap(t *testing.T) {
	bounds := []float64{0.1, 0.25, 0.3, 0.4, 1, 2.5, 60}
	for _, tc := range []struct {
		v, want float64
		ok      bool
	}{
		{0.293, 0.3, true}, {0.4, 0.4, true}, {1.049, 1, true}, {1.2, 2.5, true}, {0.26, 0.25, true}, {0.27, 0.3, true}, {30, 60, false}, {61, 0, false},
	} {
		got, ok := metrics.Snap(tc.v, 0.05, bounds)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("snap(%g) = %g, %v; want %g, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// TestEveryAlertTested: the promtool tests hold, for every alert, a case where
// it fires and one where it must not, and docs/runbooks.md has its section.
func TestEveryAlertTested(t *testing.T) {
	b := shippedBaseline(t)
	rf, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tf, err := PromTests(b, rf, "x")
	if err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, g := range tf.Tests {
		for _, a := range g.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				silent[a.Alertname]++
			}
		}
	}
	runbook, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if fires[r.Alert] == 0 || silent[r.Alert] == 0 {
				t.Errorf("%s: %d firing and %d silent test cases", r.Alert, fires[r.Alert], silent[r.Alert])
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[k] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, k)
				}
			}
			if !strings.Contains(r.Annotations["description"], "$value") {
				t.Errorf("%s: description does not show the value", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if !slices.Contains(AlertNames, r.Alert) {
				t.Errorf("%s not in AlertNames", r.Alert)
			}
		}
	}
	for _, a := range AlertNames {
		if !strings.Contains(string(runbook), "\n## "+a+"\n") {
			t.Errorf("docs/runbooks.md has no section \"## %s\"", a)
		}
	}
	// Each latency pair: warning alone, then both, in a case each; plus the
	// one case that a blinking target_up still fires, and one per pair with
	// a whole-number bound whose buckets are spelt as Prometheus 3 stores them.
	latencyRules := 0
	for _, r := range rf.Groups[3].Rules {
		if r.Alert == AlertLatencyAboveBaseline {
			latencyRules++
		}
	}
	prom3 := 0
	for _, g := range tf.Tests {
		if strings.HasSuffix(g.Name, "le as Prometheus 3 stores it") {
			prom3++
		}
	}
	if prom3 == 0 {
		t.Error("no latency case with le spelt as Prometheus 3 stores it")
	}
	if fires[AlertLatencyAboveBaseline] != latencyRules+1+prom3 {
		t.Errorf("%d firing latency cases for %d latency rules and %d Prometheus 3 cases", fires[AlertLatencyAboveBaseline], latencyRules, prom3)
	}
}

// TestTimeScale: the test copy of the rules scales every for:, window and offset.
func TestTimeScale(t *testing.T) {
	b := shippedBaseline(t)
	files, err := RuleFiles(b, Options{TimeScale: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	s := string(files["dbcanary-rules.yml"])
	for _, want := range []string{"[15s]", "[3m]", "offset 1h12m", "for: 30s", ", 15)", "[3h36m]"} {
		if !strings.Contains(s, want) {
			t.Errorf("scaled rules lack %q", want)
		}
	}
	for _, bad := range []string{"[5m]", "[1h]", "offset 1d", "for: 5m"} {
		if strings.Contains(s, bad) {
			t.Errorf("scaled rules still contain %q", bad)
		}
	}
	if _, ok := files["tests/dbcanary-rules_test.yml"]; ok {
		t.Error("scaled rules must not come with the (unscaled) promtool tests")
	}
}

// TestDashboardsLint checks the committed boards (lintBoard) and that the
// latency panels of ops with a baseline draw its warning and critical bounds
// (checkThresholdLines).
func TestDashboardsLint(t *testing.T) {
	b := shippedBaseline(t)
	files, err := filepath.Glob(filepath.Join(repoRoot(), "dashboards", "*.json"))
	if err != nil || len(files) != len(mustBackends(t))+1 {
		t.Fatalf("boards: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lintBoard(t, filepath.Base(f), data)
	}
	checkThresholdLines(t, b)
}

// lintBoard checks one board, decoded with the SDK's strict decoder: unique
// panel ids, every panel but a row has a query, every query uses the
// datasource and target variables, units and thresholds are set.
func lintBoard(t *testing.T, name string, data []byte) {
	t.Helper()
	plugins.RegisterDefaultPlugins()
	var db dashboard.Dashboard
	if err := db.UnmarshalJSONStrict(data); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	vars := map[string]dashboard.VariableModel{}
	for _, v := range db.Templating.List {
		vars[v.Name] = v
	}
	if vars["datasource"].Type != "datasource" || vars["target"].Type != "query" || !isDatasourceVar(vars["target"].Datasource) {
		t.Errorf("%s: datasource and target variables missing or wrong: %+v", name, vars)
	}
	if db.Uid == nil || *db.Uid == "" || db.SchemaVersion != SchemaVersion {
		t.Errorf("%s: uid %v schema %d", name, db.Uid, db.SchemaVersion)
	}
	ids := map[uint32]bool{}
	for _, pr := range db.Panels {
		if r := pr.RowPanel; r != nil {
			if ids[r.Id] || r.Id == 0 {
				t.Errorf("%s: row %v: duplicate or zero id %d", name, r.Title, r.Id)
			}
			ids[r.Id] = true
			continue
		}
		p := pr.Panel
		where := name + ": panel " + *p.Title
		if p.Id == nil || ids[*p.Id] || *p.Id == 0 {
			t.Errorf("%s: duplicate or zero id %v", where, p.Id)
		} else {
			ids[*p.Id] = true
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		if !isDatasourceVar(p.Datasource) {
			t.Errorf("%s: datasource is not ${datasource}", where)
		}
		qs := promQueries(p)
		if len(qs) != len(p.Targets) {
			t.Errorf("%s: a query is not a Prometheus query", where)
		}
		for _, q := range qs {
			if !isDatasourceVar(q.Datasource) {
				t.Errorf("%s: query %v does not use ${datasource}", where, q.RefId)
			}
			if !strings.Contains(q.Expr, targetMatcher) {
				t.Errorf("%s: query %q does not filter by $target", where, q.Expr)
			}
		}
		if p.FieldConfig == nil || p.FieldConfig.Defaults.Unit == nil || *p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("%s: no unit", where)
			continue
		}
		th := p.FieldConfig.Defaults.Thresholds
		if th == nil || len(th.Steps) == 0 || th.Steps[0].Value != nil {
			t.Errorf("%s: thresholds missing or without a base step", where)
		}
	}
}

// isDatasourceVar: ref is the board's datasource variable.
func isDatasourceVar(ref *common.DataSourceRef) bool {
	return ref != nil && ref.Uid != nil && *ref.Uid == "${datasource}"
}

// promQueries is a panel's Prometheus queries (built boards hold values,
// decoded ones pointers).
func promQueries(p *dashboard.Panel) []prometheus.Dataquery {
	var out []prometheus.Dataquery
	for _, q := range p.Targets {
		switch q := q.(type) {
		case prometheus.Dataquery:
			out = append(out, q)
		case *prometheus.Dataquery:
			out = append(out, *q)
		}
	}
	return out
}

// checkThresholdLines: every op with an alert figure in the baseline has a
// board panel drawing both bounds.
func checkThresholdLines(t *testing.T, b *baseline.File) {
	t.Helper()
	d, err := newBoardData(b)
	if err != nil {
		t.Fatal(err)
	}
	boards, err := Dashboards(b)
	if err != nil {
		t.Fatal(err)
	}
	for k, pair := range d.thresholds {
		found := false
		for _, pr := range boards["dbcanary-"+pair[0].Backend+".json"].Panels {
			p := pr.Panel
			if p == nil || p.FieldConfig == nil || p.FieldConfig.Defaults.Thresholds == nil {
				continue
			}
			if qs := promQueries(p); len(qs) == 0 || !strings.Contains(qs[0].Expr, `op="`+pair[0].Op+`"`) {
				continue
			}
			var vals []float64
			for _, s := range p.FieldConfig.Defaults.Thresholds.Steps {
				if s.Value != nil {
					vals = append(vals, *s.Value)
				}
			}
			if pair[0].Phase != "" && pair[0].Phase != lastPhase(t, pair[0].Backend, pair[0].Op) {
				found = true // an op's phase panel draws its last phase's bounds
				continue
			}
			if slices.Contains(vals, pair[0].Bound) && slices.Contains(vals, pair[1].Bound) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no panel draws its thresholds", k)
		}
	}
}

// A baseline's buckets must be bounds the daemon's histograms have: they
// come from the shipped file, compiled in.
func TestBucketsOfTheBuild(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := baseline.Parse(bytes.Replace(data, []byte("buckets:\n"), []byte("buckets:\n  - 0.0123\n"), 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Thresholds(b); err == nil || !strings.Contains(err.Error(), "buckets[0]: 0.0123s is not a classic bound of this build's histograms") {
		t.Errorf("a bucket the build lacks: %v", err)
	}
}
