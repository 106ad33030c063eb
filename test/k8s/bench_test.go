//go:build integration

package k8s

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/bench"
	"github.com/dbcanary/dbcanary/test/stack"
)

// TestChartBench runs the chart's bench Jobs (bench.enabled) on the cluster:
// an Indexed Job of 3 drivers, each `dbcanary bench --profile floor --shard
// i/3 --start-at T` in a pod of its own writing its report to a
// ReadWriteMany claim (a hostPath PersistentVolume: this one-node cluster has
// no provisioner), and the merge Job waiting for the 3 reports and merging
// them. The merged report must hold the 3 drivers, one pod each, their op
// counts adding up and their windows starting together.
func TestChartBench(t *testing.T) {
	const drivers = 3
	ns := namespace(t, "dbc-bench")
	dir := filepath.Join(stack.DataDir(), "k8s", "pv", fmt.Sprintf("dbc-bench-%d", time.Now().Unix()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65532, 65532); err != nil { // no fsGroup on hostPath: the canary user's
		t.Fatal(err)
	}
	pv := filepath.Base(dir)
	t.Cleanup(func() {
		_, _ = run(kubectlCmd("delete", "pv", pv, "--wait=false"), "")
		_ = os.RemoveAll(dir)
	})
	kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s}
spec:
  capacity: {storage: 16Mi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: %[2]s, type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: bench-reports, namespace: %[3]s}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: %[1]s
  resources: {requests: {storage: 16Mi}}
`, pv, dir, ns), "apply", "-f", "-")

	t0 := time.Now()
	helmInstall(t, ns, "dbc", map[string]any{
		// The chart wants a target; the floor profile measures its own noop target.
		"config": map[string]any{"targets": []any{map[string]any{"name": "noop", "backend": "noop"}}},
		"bench": map[string]any{"enabled": true, "profile": "floor", "drivers": drivers, "startDelay": "45s",
			"args":    []string{"--rate=0", "--workers=2", "--duration=5s", "--warmup=0s"},
			"reports": map[string]any{"existingClaim": "bench-reports"},
			// The default requests a core per driver: 3 would not fit this 2-core node.
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}, "limits": map[string]any{"memory": "256Mi"}}},
	})
	job := "dbc-dbcanary-bench"
	kubectl(t, "", "-n", ns, "wait", "--for=condition=complete", "job/"+job, "job/"+job+"-merge", "--timeout=5m")
	took := time.Since(t0)

	read := func(name string) *bench.Report {
		f, err := os.Open(filepath.Join(dir, job, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := bench.ReadReport(f, name)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	m := read("merged.json")
	if len(m.Drivers) != drivers {
		t.Fatalf("merged report holds %d drivers, want %d", len(m.Drivers), drivers)
	}
	hosts := map[string]bool{}
	var count uint64
	for i := range drivers {
		d := read(fmt.Sprintf("driver-%d.json", i))
		if d.Shard == nil || d.Shard.Index != i || d.Shard.Count != drivers {
			t.Errorf("driver-%d.json: shard %+v, want %d/%d", i, d.Shard, i, drivers)
		}
		count += d.Stages[0].Ops[0].Count
	}
	for _, d := range m.Drivers {
		hosts[d.Host] = true
		if skew := d.Started.Sub(m.Drivers[0].Started).Abs(); skew > time.Second {
			t.Errorf("driver %d started %s apart from driver 0: not on the common start", d.Shard, skew)
		}
	}
	if len(hosts) != drivers {
		t.Errorf("drivers ran on %d hosts (pods) %v, want %d", len(hosts), hosts, drivers)
	}
	if got := m.Stages[0].Ops[0].Count; got != count || count == 0 {
		t.Errorf("merged op count %d, want the drivers' sum %d (> 0)", got, count)
	}
	stack.Figure(t, "chart bench Jobs: %d drivers (pods %v) and the merge completed %s after helm install; summary rate %.0f ops/s, %d ops",
		drivers, hosts, took.Round(time.Second), m.Stages[0].Throughput, count)
}
