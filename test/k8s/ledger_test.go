//go:build integration

package k8s

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// TestLedgerSurvivesPodDeletion: the chart's state volume on a
// PersistentVolumeClaim (stateDir.existingClaim; a hostPath PersistentVolume:
// this cluster has no provisioner) keeps the durability ledger when the pod is
// deleted: the new pod starts with the old pod's entries and reads them back
// intact, with no false loss. The ledger file is per instance, and the
// instance id is the pod name: the chart runs both modes as a StatefulSet
// (mode deployment on a claim is a one-pod StatefulSet), whose new pod has the
// old one's name and starts only once the old one has stopped.
func TestLedgerSurvivesPodDeletion(t *testing.T) {
	for _, mode := range []string{"sharded", "deployment"} {
		t.Run(mode, func(t *testing.T) { ledgerSurvives(t, mode) })
	}
}

func ledgerSurvives(t *testing.T, mode string) {
	ns := namespace(t, "dbc-ledger-"+mode)
	s3Secret(t, ns, "minio")
	dir := filepath.Join(stack.DataDir(), "k8s", "pv", fmt.Sprintf("dbc-ledger-%s-%d", mode, time.Now().Unix()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A hostPath volume gets no fsGroup: the directory is the canary user's.
	if err := os.Chown(dir, 65532, 65532); err != nil {
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
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: %[2]s, type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: dbcanary-state, namespace: %[3]s}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: %[1]s
  resources: {requests: {storage: 16Mi}}
`, pv, dir, ns), "apply", "-f", "-")

	target := "minio-ledger"
	helmInstall(t, ns, "dbc", map[string]any{
		"config": map[string]any{"targets": []any{
			s3Target(target, "minio", map[string]any{"ledger": map[string]any{"ages": []string{"10s", "30s"}}}),
		}},
		"existingSecrets": []any{map[string]any{"name": "minio"}},
		"stateDir":        map[string]any{"existingClaim": "dbcanary-state"},
		"mode":            mode,
		"replicas":        1,
	})
	sel := podSelector
	old := waitReady(t, ns, sel, 1, 2*time.Minute)[0]
	if kind := kubectl(t, "", "-n", ns, "get", "statefulset,deployment", "-l", sel, "-o", "name"); kind != "statefulset.apps/dbc-dbcanary\n" {
		t.Errorf("mode %s on a claim: workloads %q, want the one-pod StatefulSet", mode, kind)
	}
	// Entries written and some already read back intact by the first pod.
	first := waitLedger(t, old, target, func(l ledgerView) bool { return l.entries > 0 && l.checks["intact"] > 0 }, 3*time.Minute)
	checkRuntime(t, old, "dbcanary")

	deleted := time.Now()
	kubectl(t, "", "-n", ns, "delete", "pod", old.Name, "--wait=true", "--timeout=120s")
	var again pod
	for deadline := time.Now().Add(2 * time.Minute); again.UID == ""; time.Sleep(500 * time.Millisecond) {
		for _, p := range pods(t, ns, sel) {
			if p.UID != old.UID && p.IP != "" && !p.Terminating {
				again = p
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new pod within 2m")
		}
	}
	// Its first answer already holds the old pod's entries (loaded from the volume).
	loaded := waitLedger(t, again, target, func(ledgerView) bool { return true }, 2*time.Minute)
	// An entry older than the new pod can only come from the old pod's file.
	if loaded.entries == 0 || loaded.oldest <= time.Since(deleted) {
		t.Errorf("new pod %s starts with %v entries, the oldest %s old (deleted %s ago): not the old pod's ledger (%v entries)",
			again.Name, loaded.entries, loaded.oldest, time.Since(deleted).Round(time.Second), first.entries)
	}
	// Then it reads them back: intact, none missing or corrupted.
	later := waitLedger(t, again, target, func(l ledgerView) bool { return l.checks["intact"] >= 2 }, 3*time.Minute)
	if later.checks["missing"] != 0 || later.checks["corrupted"] != 0 {
		t.Errorf("after the pod's deletion: ledger checks %v, want no missing or corrupted", later.checks)
	}
	stack.Figure(t, "mode "+mode+": ledger on a PersistentVolume: old pod %v entries (checks %v); new pod started with %v entries (oldest %s), then checks %v",
		first.entries, first.checks, loaded.entries, loaded.oldest.Round(time.Second), later.checks)
}

// ledgerView is one scrape's ledger series of a target.
type ledgerView struct {
	entries float64
	oldest  time.Duration      // dbcanary_ledger_oldest_entry_age_seconds
	checks  map[string]float64 // by result
}

// waitLedger scrapes p until ok holds for target's ledger series.
func waitLedger(t *testing.T, p pod, target string, ok func(ledgerView) bool, timeout time.Duration) ledgerView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last ledgerView
	for {
		if fams, err := scrape(p.IP); err == nil {
			l := ledgerView{checks: map[string]float64{}}
			for _, m := range fams["dbcanary_ledger_entries"].GetMetric() {
				if label(m, "target") == target {
					l.entries += m.GetGauge().GetValue()
				}
			}
			for _, m := range fams["dbcanary_ledger_oldest_entry_age_seconds"].GetMetric() {
				if label(m, "target") == target {
					l.oldest = max(l.oldest, time.Duration(m.GetGauge().GetValue()*float64(time.Second)))
				}
			}
			for _, m := range fams["dbcanary_ledger_checks_total"].GetMetric() {
				if label(m, "target") == target {
					l.checks[label(m, "result")] += m.GetCounter().GetValue()
				}
			}
			if ok(l) {
				return l
			}
			last = l
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: ledger of %s after %s: %+v", p.Name, target, timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
