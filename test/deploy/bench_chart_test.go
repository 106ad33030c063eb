package deploy

// The chart's bench Jobs (bench.enabled): N drivers of one `dbcanary bench`
// run as an Indexed Job and the merge Job, checked by rendering, then run
// as local processes with the rendered command lines (no cluster needed).

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const benchOn = `
bench:
  enabled: true
  drivers: 3
  startAt: "2026-12-06T03:00:00Z"
  args: [--duration=2s, --warmup=0s, --rate=0, --workers=1]
  reports: {existingClaim: bench-reports}
`

// TestChartBenchJob: off by default; on, an Indexed Job of N drivers whose
// pod i runs `bench --shard i/N` at the common start, writing its report to
// the claim, and a merge Job that waits for the N reports; no Service, PDB
// or NetworkPolicy of the daemon selects a bench pod.
func TestChartBenchJob(t *testing.T) {
	chart := chartCopy(t)
	for k := range mustTemplate(t, chart) {
		if strings.HasPrefix(k, "Job/") {
			t.Errorf("%s rendered while bench.enabled is false", k)
		}
	}
	objs := mustTemplate(t, chart, benchOn, "podDisruptionBudget: {enabled: true}\nnetworkPolicy: {enabled: true}\n")
	job := get[batchv1.Job](t, objs, "Job/dbcanary-bench")
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 3 || *s.Parallelism != 3 || *s.BackoffLimit != 0 {
		t.Errorf("job spec: mode %v, completions %v, parallelism %v, backoffLimit %v; want Indexed, 3, 3, 0", s.CompletionMode, *s.Completions, *s.Parallelism, *s.BackoffLimit)
	}
	pod := s.Template.Spec
	c := pod.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"bench --profile=floor --shard=$(JOB_COMPLETION_INDEX)/3 --start-at=2026-12-06T03:00:00Z",
		"--json=/reports/dbcanary-bench/driver-$(JOB_COMPLETION_INDEX).json", "--html=/reports/dbcanary-bench/driver-$(JOB_COMPLETION_INDEX).html",
		"--config.file=/etc/dbcanary/dbcanary.yaml", "--duration=2s"} {
		if !strings.Contains(args, want) {
			t.Errorf("driver args %q lack %q", args, want)
		}
	}
	if len(c.Env) == 0 || c.Env[0].Name != "JOB_COMPLETION_INDEX" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("env %+v: JOB_COMPLETION_INDEX must be declared first, from the completion index annotation", c.Env)
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever || claimOf(pod) != "bench-reports" || pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Errorf("pod: restartPolicy %s, claim %q, affinity %+v", pod.RestartPolicy, claimOf(pod), pod.Affinity)
	}
	merge := get[batchv1.Job](t, objs, "Job/dbcanary-bench-merge")
	margs := strings.Join(merge.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(margs, "bench merge --wait=3570s --json=/reports/dbcanary-bench/merged.json --html=/reports/dbcanary-bench/merged.html /reports/dbcanary-bench/driver-0.json /reports/dbcanary-bench/driver-1.json /reports/dbcanary-bench/driver-2.json") {
		t.Errorf("merge args %q", margs)
	}
	for _, p := range []corev1.PodTemplateSpec{s.Template, merge.Spec.Template} {
		for key, sel := range daemonSelectors(t, objs) {
			if sel.Matches(labels.Set(p.Labels)) {
				t.Errorf("%s selects the bench pod %v", key, p.Labels)
			}
		}
	}
}

func claimOf(pod corev1.PodSpec) string {
	for _, v := range pod.Volumes {
		if v.Name == "reports" && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// daemonSelectors are the selectors of the daemon's Services, PDB and NetworkPolicy.
func daemonSelectors(t *testing.T, objs objects) map[string]labels.Selector {
	t.Helper()
	out := map[string]labels.Selector{}
	for _, k := range objs.keys() {
		var m map[string]string
		switch o := objs[k].(type) {
		case *corev1.Service:
			m = o.Spec.Selector
		default:
			b, _ := json.Marshal(o)
			var spec struct {
				Spec struct {
					Selector    struct{ MatchLabels map[string]string } `json:"selector"`
					PodSelector struct{ MatchLabels map[string]string } `json:"podSelector"`
				} `json:"spec"`
			}
			_ = json.Unmarshal(b, &spec)
			m = spec.Spec.Selector.MatchLabels
			if m == nil {
				m = spec.Spec.PodSelector.MatchLabels
			}
		}
		if len(m) > 0 && !strings.HasPrefix(k, "Job/") {
			out[k] = labels.SelectorFromSet(m)
		}
	}
	if len(out) < 3 {
		t.Fatalf("found the selectors of %v only: want the Services, the PDB and the NetworkPolicy", out)
	}
	return out
}

// TestChartBenchValues: the start defaults to the render time plus
// startDelay; a missing claim, profile or a driver count out of range is
// refused with the key's name.
func TestChartBenchValues(t *testing.T) {
	chart := chartCopy(t)
	before := time.Now().UTC().Truncate(time.Second)
	objs := mustTemplate(t, chart, "bench: {enabled: true, startDelay: 5m, reports: {existingClaim: r, subdirectory: run-7}}\n")
	args := get[batchv1.Job](t, objs, "Job/dbcanary-bench").Spec.Template.Spec.Containers[0].Args
	var start time.Time
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--start-at="); ok {
			var err error
			if start, err = time.Parse(time.RFC3339, v); err != nil {
				t.Fatal(err)
			}
		}
		if strings.HasPrefix(a, "--json=") && a != "--json=/reports/run-7/driver-$(JOB_COMPLETION_INDEX).json" {
			t.Errorf("%s: want the subdirectory run-7", a)
		}
	}
	if d := start.Sub(before); d < 5*time.Minute || d > 6*time.Minute {
		t.Errorf("--start-at %s is %s after rendering, want startDelay 5m", start, d)
	}
	for _, c := range []struct{ values, want string }{
		{"bench: {enabled: true}\n", "bench.enabled needs bench.reports.existingClaim"},
		{"bench: {enabled: true, profile: '', reports: {existingClaim: r}}\n", "bench.enabled needs bench.profile"},
		{"bench: {enabled: true, drivers: 0, reports: {existingClaim: r}}\n", "drivers"},
		{"bench: {enabled: true, startAt: tomorrow, reports: {existingClaim: r}}\n", "startAt"},
	} {
		if _, err := template(t, chart, c.values); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(c.values), err, c.want)
		}
	}
}

// TestChartBenchJobLocally runs what the cluster would: the rendered driver
// command line once per completion index (with $(JOB_COMPLETION_INDEX)
// expanded as the kubelet does) and the rendered merge command beside
// them, as local processes of this tree's binary, with the claim and the
// ConfigMap as local directories. The merged report has every driver's ops.
func TestChartBenchJobLocally(t *testing.T) {
	bin := dbcanary(t)
	start := time.Now().Add(8 * time.Second).UTC().Format(time.RFC3339)
	objs := mustTemplate(t, chartCopy(t), benchOn, "bench: {startAt: \""+start+"\"}\n")
	dir := t.TempDir()
	cm := get[corev1.ConfigMap](t, objs, "ConfigMap/dbcanary")
	if err := os.WriteFile(filepath.Join(dir, "dbcanary.yaml"), []byte(cm.Data["dbcanary.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	local := func(args []string, index string) []string {
		var out []string
		for _, a := range args {
			a = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", index)
			a = strings.ReplaceAll(a, "/etc/dbcanary/", dir+"/")
			out = append(out, strings.ReplaceAll(a, "/reports/", dir+"/reports/"))
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var procs []*exec.Cmd
	run := func(args []string, index string) {
		cmd := exec.CommandContext(ctx, bin, local(args, index)...)
		cmd.Env = append(os.Environ(), "DBCANARY_INSTANCE_ID=bench-"+index)
		cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	run(get[batchv1.Job](t, objs, "Job/dbcanary-bench-merge").Spec.Template.Spec.Containers[0].Args, "merge")
	driverArgs := get[batchv1.Job](t, objs, "Job/dbcanary-bench").Spec.Template.Spec.Containers[0].Args
	for i := range 3 {
		run(driverArgs, strconv.Itoa(i))
	}
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("process %d (%v): %v\n%s", i, p.Args, err, p.Stderr)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "reports", "dbcanary-bench", "merged.json"))
	if err != nil {
		t.Fatal(err)
	}
	var merged struct {
		Drivers []struct {
			Shard  int
			Stages []struct{ Count uint64 }
		}
		Stages []struct{ Ops []struct{ Count uint64 } }
	}
	if err := json.Unmarshal(b, &merged); err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, d := range merged.Drivers {
		sum += d.Stages[0].Count
	}
	if len(merged.Drivers) != 3 || sum == 0 || merged.Stages[0].Ops[0].Count != sum {
		t.Errorf("merged report: %d drivers, their ops %d, merged ops %d", len(merged.Drivers), sum, merged.Stages[0].Ops[0].Count)
	}
}
