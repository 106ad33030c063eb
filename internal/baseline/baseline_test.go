package baseline

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func shipped(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "baselines", "james-reference.yaml")
}

func TestShippedBaselineLoads(t *testing.T) {
	b, err := Load(shipped(t))
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, f := range b.Figures {
		if f.Use == UseAlert {
			alerts++
		}
		if b.Source(f.Source).Document == "" {
			t.Errorf("figure %s: no source document", f.ID)
		}
	}
	if alerts == 0 {
		t.Fatal("no alert figure")
	}
	if got := b.Policy.SLOObjective; got != 0.999 {
		t.Errorf("slo_objective = %g", got)
	}
}

const good = `
factors: {warning: 1.0, critical: 3.0}
snap_tolerance: 0.05
policy: {slo_objective: 0.999, error_ratio_warning: 0.05, stale_after: 5m, drift_factor: 2, drift_min_seconds: 0.005, job: dbcanary}
sources:
  - {id: s, document: doc.txt, conditions: lab}
figures:
  - {id: f, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 400, unit: ms, quoted: "400 ms", source: s, conditions: c, use: alert}
`

func TestParseGood(t *testing.T) {
	b, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	f := b.Figures[0]
	if s := f.Seconds(); s != 0.4 {
		t.Errorf("seconds = %g", s)
	}
	if q, ok := f.Quantile(); !ok || q != 0.99 {
		t.Errorf("quantile = %g %v", q, ok)
	}
}

// TestParseBad asserts the exact error text, which names the path of the problem.
func TestParseBad(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown key", "snap_tolerance: 0.05", "snap_tolerance: 0.05\nsnap: 1", "decoding: yaml: unmarshal errors:\n  line 4: field snap not found in type baseline.File"},
		{"buckets", "snap_tolerance: 0.05", "snap_tolerance: 0.05\nbuckets: [0.1, 0, 0.1]", "buckets[1]: must be a bound in seconds above 0 and at most 3600, listed once, got 0\n" +
			"buckets[2]: must be a bound in seconds above 0 and at most 3600, listed once, got 0.1"},
		{"warning below 1", "warning: 1.0", "warning: 0.5", "factors.warning: must be at least 1 (a figure measured under load is a ceiling), got 0.5"},
		{"critical not above warning", "critical: 3.0", "critical: 1.0", "factors.critical: must be above warning (1), got 1"},
		{"slo", "slo_objective: 0.999", "slo_objective: 1", "policy.slo_objective: must be in (0.9, 1), got 1"},
		{"stale", "stale_after: 5m", "stale_after: 10s", "policy.stale_after: must be at least 1m, got 10s"},
		{"job", "job: dbcanary", "job: \"\"", `policy.job: must be a Prometheus job name like dbcanary, got ""`},
		{"unit", "unit: ms", "unit: minutes", `figures[0](f).unit: a latency is in us, ms or s, got "minutes"`},
		{"stat", "stat: p99", "stat: p100", `figures[0](f).stat: a latency stat is mean or pNN (p50, p99, p99.9), got "p100"`},
		{"mean alert", "stat: p99", "stat: mean", `figures[0](f).use: only a quantile can be alerted on (histogram_quantile), not "mean"`},
		{"source", "source: s,", "source: nope,", `figures[0](f).source: unknown source "nope" (define it under sources)`},
		{"value", "value: 400", "value: -1", "figures[0](f).value: must be a positive number, got -1"},
		{"conditions", "conditions: c,", "conditions: \"\",", "figures[0](f).conditions: missing: state the test conditions of this figure"},
		{"no ops", "ops: [publish]", "ops: []", "figures[0](f).ops: missing: list the canary ops the figure applies to"},
		{"kind", "kind: latency", "kind: size", `figures[0](f).kind: must be latency, phase or throughput, got "size"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.from) {
				t.Fatalf("bad test: %q not in the good file", tc.from)
			}
			_, err := Parse([]byte(strings.Replace(good, tc.from, tc.to, 1)))
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %q\nwant %q", err.Error(), tc.want)
			}
		})
	}
}

func TestDuplicateAlertFigure(t *testing.T) {
	dup := good + `  - {id: g, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 300, unit: ms, quoted: "300 ms", source: s, conditions: c, use: alert}
`
	_, err := Parse([]byte(dup))
	want := "figures[1](g).ops: rabbitmq publish p99 is already alerted on by figure f"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

// A figure may be limited to targets: per target, one alert figure per
// backend/op/phase/stat, beside one that names no target.
func TestTargetFigures(t *testing.T) {
	ok := good + `  - {id: g, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 3, unit: ms, quoted: "3 ms", source: s, conditions: c, use: alert, targets: [mq-a, mq.b], samples: 600}
  - {id: h, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 4, unit: ms, quoted: "4 ms", source: s, conditions: c, use: alert, targets: [mq-c]}
`
	b, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if g := b.Figures[1]; len(g.Targets) != 2 || g.Samples != 600 {
		t.Fatalf("figure g: %+v", g)
	}
	for _, tc := range []struct{ extra, want string }{
		{`  - {id: g, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 3, unit: ms, quoted: "3 ms", source: s, conditions: c, use: alert, targets: [a, a]}
  - {id: h, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 3, unit: ms, quoted: "3 ms", source: s, conditions: c, use: alert, targets: [Bad]}
`, "figures[1](g).targets[1]: duplicate \"a\"\nfigures[1](g).ops: rabbitmq publish p99 on target a is already alerted on by figure g\nfigures[2](h).targets[0]: not a target name: \"Bad\""},
		{`  - {id: g, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 3, unit: ms, quoted: "3 ms", source: s, conditions: c, use: alert, targets: [a], samples: -1}
  - {id: h, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 3, unit: ms, quoted: "3 ms", source: s, conditions: c, use: alert, targets: [a]}
`, "figures[1](g).samples: must not be negative, got -1\nfigures[2](h).ops: rabbitmq publish p99 on target a is already alerted on by figure g"},
	} {
		_, err := Parse([]byte(good + tc.extra))
		if err == nil || err.Error() != tc.want {
			t.Errorf("error:\n got %v\nwant %s", err, tc.want)
		}
	}
}

// A policy key a file leaves out takes DefaultPolicy's value; one it sets,
// even to zero, is its own (and validated: a zero is not silently a default).
func TestPolicyDefaults(t *testing.T) {
	noPolicy := strings.Replace(good, "policy: {slo_objective: 0.999, error_ratio_warning: 0.05, stale_after: 5m, drift_factor: 2, drift_min_seconds: 0.005, job: dbcanary}\n", "", 1)
	b, err := Parse([]byte(noPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(b.Policy) != fmt.Sprint(DefaultPolicy) {
		t.Errorf("policy of a file without one:\n got %+v\nwant %+v", b.Policy, DefaultPolicy)
	}
	b, err = Parse([]byte(strings.Replace(good, "job: dbcanary}", "job: canary, min_slow_samples: 4}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if b.Policy.Job != "canary" || b.Policy.MinSlowSamples != 4 || b.Policy.StaleIntervals != DefaultPolicy.StaleIntervals {
		t.Errorf("policy: %+v", b.Policy)
	}
	_, err = Parse([]byte(strings.Replace(good, "job: dbcanary}", "job: dbcanary, stale_intervals: 0}", 1)))
	if err == nil || err.Error() != "policy.stale_intervals: must be at least 2 (a success may come late by one interval), got 0" {
		t.Errorf("stale_intervals: 0: %v", err)
	}
}
