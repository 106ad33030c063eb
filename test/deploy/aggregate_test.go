package deploy

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/stack"
)

// TestChartPrometheusRuleAggregateBy: prometheusRule.aggregateBy renders
// exactly the expressions `dbcanary generate rules` makes with the same
// labels in policy.aggregate_by, and refuses what the baseline refuses.
func TestChartPrometheusRuleAggregateBy(t *testing.T) {
	chart := chartCopy(t)
	keep := []string{"cluster", "region"}
	b, err := baseline.Load(filepath.Join(stack.RepoRoot(), "baselines", "james-reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b.Policy.AggregateBy = keep
	rf, err := generate.Rules(b, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			want = append(want, strings.ReplaceAll(r.Expr, `job="`+b.Policy.Job+`"`, `job="dbcanary"`))
		}
	}
	pr := get[PrometheusRule](t, mustTemplate(t, chart, "job: dbcanary\nprometheusRule: {enabled: true, aggregateBy: [cluster, region]}\n"), "PrometheusRule/dbcanary")
	var got []string
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			got = append(got, r.Expr)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d rules rendered, the generator makes %d", len(got), len(want))
	}
	kept := 0
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d:\nchart:     %s\ngenerator: %s", i, got[i], want[i])
		}
		if strings.Contains(got[i], "cluster, region)") {
			kept++
		}
	}
	if kept == 0 {
		t.Error("no rendered rule keeps cluster and region")
	}

	for _, bad := range []struct{ values, msg string }{
		{"prometheusRule: {enabled: true, aggregateBy: [op]}", `prometheusRule.aggregateBy[0]: "op" is one of the canary's own labels`},
		{"prometheusRule: {enabled: true, aggregateBy: [cluster, cluster]}", "aggregateBy"},
		{"prometheusRule: {enabled: true, aggregateBy: [\"not-a-label\"]}", "aggregateBy"},
	} {
		_, err := template(t, chart, bad.values+"\n")
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("values %s: want an error naming %q, got %v", bad.values, bad.msg, err)
		}
	}
}
