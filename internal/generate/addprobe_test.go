package generate

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/probetest"
)

// A throwaway backend, as a new probe package would declare it: a config
// with its ops, a probe, and its one record with its facts. Nothing in this
// package knows its name.
const throwaway = "throwaway"

type throwawayConfig struct{}

func (throwawayConfig) Validate() []error { return nil }

func (throwawayConfig) Ops() []probes.OpSpec {
	return append([]probes.OpSpec{
		{Name: "write", DefaultRate: 1, Help: "write a thing"},
		{Name: "read", DefaultRate: 1, Phases: []string{"connect", "body"}, Help: "read it back"},
	}, probes.LedgerSpecs()...)
}

type throwawayProbe struct{}

func (throwawayProbe) Prepare(context.Context) error                      { return nil }
func (throwawayProbe) Run(context.Context, string, *probes.Outcome) error { return nil }
func (throwawayProbe) Close() error                                       { return nil }

func registerThrowaway() {
	probes.Register(probes.Backend{Name: throwaway,
		NewConfig: func() probes.Config { return throwawayConfig{} },
		New:       func(probes.Target) (probes.Probe, error) { return throwawayProbe{}, nil },
		Facts: probes.Facts{
			Title: "Throwaway",
			Ops: []probes.OpFacts{{Name: "write"}, {Name: "read", Phases: []string{"connect", "body"}},
				{Name: probes.OpLedgerWrite}, {Name: probes.OpLedgerCheck}},
			Panels: []probes.Panel{{Title: "Write vs read, p99", Description: "Both ops' p99.", ThresholdsOf: "write",
				Queries: []probes.Query{{Series: probes.SeriesLatency, Ops: "write|read", Quantile: 0.99, Legend: "{{target}} {{op}}"}}}},
		}})
}

// Its baseline figures, appended to the shipped file's figures (its last section).
const throwawayFigures = `  - {id: throwaway-write-p99, backend: throwaway, ops: [write], kind: latency, stat: p99, value: 10, unit: ms, quoted: "p99 10 ms", source: james-db, conditions: "a test", use: alert}
  - {id: throwaway-body-p99, backend: throwaway, ops: [read], kind: phase, phase: body, stat: p99, value: 100, unit: ms, quoted: "p99 100 ms", source: james-db, conditions: "a test", use: alert}
`

const addProbeEnv = "DBCANARY_TEST_ADD_PROBE"

// TestAddProbe adds a backend without touching this package: a probe
// registered with its one record (probes.Register) with figures in
// the baseline gets latency rules and promtool tests that promtool passes, an
// overview row and a board that pass the board checks; the other boards stay
// as they are. The regenerated files that change are the ones
// docs/adding-a-probe.md lists. Before that, it counts the files the page
// has a new backend write (at most maxBackendFiles) and checks that nothing
// under internal/ or cmd/ names a backend (checkAddedFiles).
func TestAddProbe(t *testing.T) {
	if os.Getenv(addProbeEnv) == "" {
		checkAddedFiles(t)
		// The registry is global: the throwaway probe lives in a child
		// process, so every other test sees only the real probes.
		cmd := exec.Command(os.Args[0], "-test.run=^TestAddProbe$", "-test.v")
		cmd.Env = append(os.Environ(), addProbeEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with a throwaway probe: %v\n%s", err, out)
		}
		t.Logf("with a throwaway probe:\n%s", out)
		return
	}
	shipped := shippedBaseline(t)
	before := generated(t, shipped)
	registerThrowaway()
	if errs := probetest.CheckFacts(mustFacts(t), throwawayConfig{}); len(errs) > 0 {
		t.Fatalf("facts and ops differ: %v", errs)
	}

	// The probe alone: its overview row and board, no rule yet.
	changed := diffFiles(before, generated(t, shipped))
	want := []string{"dashboards/dbcanary-overview.json", "dashboards/dbcanary-throwaway.json"}
	if strings.Join(changed, " ") != strings.Join(want, " ") {
		t.Errorf("adding the probe changed %v, want %v", changed, want)
	}

	// With its figures: latency rules, their promtool tests and thresholds.
	data, err := os.ReadFile(filepath.Join(repoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := baseline.Parse(append(data, throwawayFigures...))
	if err != nil {
		t.Fatal(err)
	}
	after := generated(t, b)
	changed = diffFiles(before, after)
	want = []string{"alerts/dbcanary-rules.yml", "alerts/tests/dbcanary-rules_test.yml", "alerts/thresholds.md",
		"dashboards/dbcanary-overview.json", "dashboards/dbcanary-throwaway.json"}
	if strings.Join(changed, " ") != strings.Join(want, " ") {
		t.Errorf("adding the probe and its figures changed %v, want %v", changed, want)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "adding-a-probe.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(changed, "deploy/helm/dbcanary/files/dbcanary-rules.yml", "probes/all/all.go", "register.go", "baselines/") {
		if f = strings.ReplaceAll(f, throwaway, "<name>"); !bytes.Contains(doc, []byte(f)) {
			t.Errorf("docs/adding-a-probe.md does not name %s", f)
		}
	}

	rules := string(after["alerts/dbcanary-rules.yml"])
	for _, s := range []string{`{backend="throwaway",op="write",quantile="0.99"} > 0.01 and`, `{backend="throwaway",op="write",quantile="0.99"} > 0.03 and`,
		`{backend="throwaway",op="read",phase="body",quantile="0.99"} > 0.1 and`, `{backend="throwaway",op="read",phase="body",quantile="0.99"} > 0.3 and`} {
		if !strings.Contains(rules, s) {
			t.Errorf("rules lack %s", s)
		}
	}
	if !KnownOp(throwaway, "read", "body") || KnownOp(throwaway, "read", "other") {
		t.Error("KnownOp does not read the probe's facts")
	}
	promtoolOwnTests(t, b)

	// Its board passes the board checks; the overview has its row.
	lintBoard(t, "dbcanary-throwaway.json", after["dashboards/dbcanary-throwaway.json"])
	strictSchema(t, "dbcanary-throwaway.json", after["dashboards/dbcanary-throwaway.json"])
	checkThresholdLines(t, b)
	board := string(after["dashboards/dbcanary-throwaway.json"])
	for _, s := range []string{`"title": "Write vs read, p99"`, `op=~\"write|read\",quantile=\"0.99\"`, `"title": "read: connect vs body"`,
		`"title": "write"`, `"title": "Durability ledger`} {
		if !strings.Contains(board, s) {
			t.Errorf("board lacks %s", s)
		}
	}
	if !strings.Contains(string(after["dashboards/dbcanary-overview.json"]), `"title": "Throwaway"`) {
		t.Error("overview has no Throwaway row")
	}

	// A probe registered without facts is an error.
	probes.Register(probes.Backend{Name: "ghost", NewConfig: func() probes.Config { return throwawayConfig{} },
		New: func(probes.Target) (probes.Probe, error) { return throwawayProbe{}, nil }})
	if _, err := Dashboards(b); err == nil || !strings.Contains(err.Error(), `"ghost" is registered without facts`) {
		t.Errorf("a backend without facts: %v", err)
	}
}

func mustFacts(t *testing.T) probes.Facts {
	t.Helper()
	be, ok := probes.Lookup(throwaway)
	if !ok {
		t.Fatal("not registered")
	}
	return be.Facts
}

// generated is every file `make generate` writes, by path under the repository.
func generated(t *testing.T, b *baseline.File) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	rules, err := RuleFiles(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	boards, err := DashboardFiles(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for n, d := range rules {
		out["alerts/"+n] = d
	}
	for n, d := range boards {
		out["dashboards/"+n] = d
	}
	return out
}

// diffFiles lists the paths new or different in after, sorted.
func diffFiles(before, after map[string][]byte) []string {
	var out []string
	for p, d := range after {
		if old, ok := before[p]; !ok || !bytes.Equal(old, d) {
			out = append(out, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// promtoolOwnTests runs promtool on the rules with the throwaway's figures
// and on the generated test cases of its thresholds.
func promtoolOwnTests(t *testing.T, b *baseline.File) {
	t.Helper()
	rf, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tf, err := PromTests(b, rf, "dbcanary-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var own []TestGroup
	for _, g := range tf.Tests {
		if strings.Contains(g.Name, throwaway) {
			own = append(own, g)
		}
	}
	if len(own) < 6 {
		t.Fatalf("%d promtool test cases for the throwaway's thresholds, want at least 6", len(own))
	}
	tf.Tests = own
	promtool := installedPromtool(t)
	dir := t.TempDir()
	rdata, err := rf.Marshal(Options{})
	if err != nil {
		t.Fatal(err)
	}
	tdata, err := tf.Marshal(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dbcanary-rules.yml"), rdata, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.yml"), tdata, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "dbcanary-rules.yml"}, {"test", "rules", "test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
