package baseline

import (
	"strings"
	"testing"
)

const calibrated = `
factors: {warning: 2.0, critical: 5.0}
snap_tolerance: 0.05
policy: {slo_objective: 0.999, error_ratio_warning: 0.05, stale_after: 5m, drift_factor: 2, drift_min_seconds: 0.005, job: dbcanary}
sources:
  - {id: calibrate, document: dbcanary calibrate, conditions: this host}
figures:
  - {id: mq_a_publish_p99, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 3, unit: ms, quoted: "3 ms", source: calibrate, conditions: c, use: alert, targets: [mq-a], samples: 600}
  - {id: mq_a_publish_p50, backend: rabbitmq, ops: [publish], kind: latency, stat: p50, value: 1, unit: ms, quoted: "1 ms", source: calibrate, conditions: c, use: reference, targets: [mq-a], factors: {warning: 2, critical: 8}}
`

// A calibrated file merges into the reference file: its figures keep its
// factors, the reference keeps its own, and the result validates.
func TestMerge(t *testing.T) {
	ref, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Parse([]byte(calibrated))
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Merge(cal); err != nil {
		t.Fatal(err)
	}
	if len(ref.Sources) != 2 || len(ref.Figures) != 3 {
		t.Fatalf("merged: %d sources, %d figures", len(ref.Sources), len(ref.Figures))
	}
	for _, tc := range []struct {
		i    int
		want Factors
	}{{0, Factors{1, 3}}, {1, Factors{2, 5}}, {2, Factors{2, 8}}} {
		if got := ref.EffectiveFactors(ref.Figures[tc.i]); got != tc.want {
			t.Errorf("figure %s: factors %+v, want %+v", ref.Figures[tc.i].ID, got, tc.want)
		}
	}
	if ref.Factors != (Factors{1, 3}) {
		t.Errorf("file factors changed: %+v", ref.Factors)
	}
	if cal.Figures[0].Factors != nil {
		t.Error("Merge changed the merged file's figures")
	}
}

// Merging a file twice, or one whose ids collide, fails naming the id and
// leaves the target file as it was.
func TestMergeConflicts(t *testing.T) {
	ref, _ := Parse([]byte(good))
	cal, _ := Parse([]byte(calibrated))
	if err := ref.Merge(cal); err != nil {
		t.Fatal(err)
	}
	n := len(ref.Figures)
	err := ref.Merge(cal)
	if err == nil || !strings.Contains(err.Error(), `source "calibrate" is in both files`) {
		t.Errorf("second merge: %v", err)
	}
	if len(ref.Figures) != n {
		t.Errorf("a failed merge changed the file: %d figures, want %d", len(ref.Figures), n)
	}
	cal.Sources[0].ID = "calibrate2"
	for i := range cal.Figures {
		cal.Figures[i].Source = "calibrate2"
	}
	err = ref.Merge(cal)
	if err == nil || !strings.Contains(err.Error(), `figure "mq_a_publish_p99" is in both files`) {
		t.Errorf("figure ids: %v", err)
	}
	cal.Figures[0].ID, cal.Figures[1].ID = "x", "y"
	err = ref.Merge(cal)
	if err == nil || !strings.Contains(err.Error(), "on target mq-a is already alerted on by figure mq_a_publish_p99") {
		t.Errorf("same target and op twice: %v", err)
	}
}
