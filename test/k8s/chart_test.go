//go:build integration

package k8s

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// podSelector selects the chart's dbcanary pods of release dbc, never its
// helm test Pod (labelled dbcanary-test).
const podSelector = "app.kubernetes.io/name=dbcanary,app.kubernetes.io/instance=dbc"

// reshardBound is the longest a target may go unprobed when a sharded
// replica is deleted, upgraded or rolled back: a pod's termination (the
// chart's 30 s grace period is not needed: dbcanary stops at SIGTERM), its
// new pod's start and first op, with room for a loaded 2-core machine. The
// measured figures are in docs/evidence/kubernetes.md.
const reshardBound = 90 * time.Second

func TestClusterUp(t *testing.T) {
	out := kubectl(t, "", "version", "-o", "json")
	if !strings.Contains(out, `"gitVersion": "`+cluster["DBCANARY_K8S_VERSION"]+`"`) {
		t.Errorf("kubectl version: want %s on both sides\n%s", cluster["DBCANARY_K8S_VERSION"], out)
	}
	kubectl(t, "", "wait", "--for=condition=Ready", "node/"+cluster["DBCANARY_K8S_NODE"], "--timeout=60s")
	stack.Figure(t, "cluster start (k8s.sh start to node Ready, binaries cached): %s; image built and imported: %s",
		startTook.Round(100*time.Millisecond), imageTook.Round(100*time.Millisecond))
}

// TestChartDeployment: mode deployment with every optional object on, against
// MinIO through the forwarder.
func TestChartDeployment(t *testing.T) {
	ns := namespace(t, "dbc-deployment")
	s3Secret(t, ns, "minio")
	targets := []string{"engine-overhead", "minio"}
	t0 := time.Now()
	took := helmInstall(t, ns, "dbc", map[string]any{
		"config": map[string]any{
			"global":  map[string]any{"timeout": "5s", "max_in_flight": 16},
			"targets": []any{noopTarget("engine-overhead", 1), s3Target("minio", "minio", nil)},
		},
		"existingSecrets":     []any{map[string]any{"name": "minio"}},
		"serviceMonitor":      map[string]any{"enabled": true},
		"prometheusRule":      map[string]any{"enabled": true},
		"alertmanagerConfig":  map[string]any{"enabled": true, "receivers": map[string]any{"pager": map[string]any{"webhookConfigs": []any{map[string]any{"url": "http://" + cluster["DBCANARY_K8S_GATEWAY"] + ":9/pager"}}}}},
		"podDisruptionBudget": map[string]any{"enabled": true},
		"networkPolicy":       map[string]any{"enabled": true},
		"dashboards":          map[string]any{"enabled": true},
	})
	ps := waitReady(t, ns, podSelector, 1, 2*time.Minute)
	first := waitProbing(t, ps[0], targets, 3*time.Minute)
	checkRuntime(t, ps[0], "dbcanary")
	fams, err := scrape(ps[0].IP)
	if err != nil {
		t.Fatal(err)
	}
	if up := gauge(fams, "dbcanary_target_up", "target"); up["minio"] != 1 {
		t.Errorf("dbcanary_target_up{target=minio} = %v through the forwarder, want 1", up["minio"])
	}
	// Every kind the chart rendered was accepted (and stored) by the API server.
	got := kubectl(t, "", "-n", ns, "get", "deployment,service,serviceaccount,configmap,servicemonitor,prometheusrule,alertmanagerconfig,poddisruptionbudget,networkpolicy",
		"-l", "app.kubernetes.io/instance=dbc", "-o", "name")
	for _, kind := range []string{"deployment.apps/", "service/", "serviceaccount/", "configmap/", "servicemonitor.monitoring.coreos.com/",
		"prometheusrule.monitoring.coreos.com/", "alertmanagerconfig.monitoring.coreos.com/", "poddisruptionbudget.policy/", "networkpolicy.networking.k8s.io/"} {
		if !strings.Contains(got, kind) {
			t.Errorf("no %s object of the release in the API server:\n%s", kind, got)
		}
	}
	checkResources(t, ns, ps[0], "dbcanary", 256<<20, 51) // the chart's limit 256Mi; request 50m = 51 CPU shares
	checkPDB(t, ns, "dbc-dbcanary", 1, 1)
	tested := helmTest(t, ns, "dbc")
	// The PodDisruptionBudget enforced where one node can: minAvailable 1 of 1 pod refuses an eviction.
	helm(t, "upgrade", "dbc", chartDir(), "--namespace", ns, "--reuse-values", "--set", "podDisruptionBudget.minAvailable=1", "--wait", "--timeout", "3m")
	checkPDB(t, ns, "dbc-dbcanary", 1, 0)
	evictionRefused(t, ns, ps[0].Name)
	failed := helmTestFails(t, ns, "dbc", "deployment/dbc-dbcanary")
	stack.Figure(t, "mode deployment: helm install --wait %s; first op of every target %s after the install began; helm test passed in %s; "+
		"with no pod behind the Service it failed in %s naming the URL",
		took.Round(100*time.Millisecond), first.Sub(t0).Round(100*time.Millisecond), tested.Round(100*time.Millisecond), failed.Round(100*time.Millisecond))
}

// TestChartVantage: mode vantage, two vantages pinned to this node; each
// pod's series carry its vantage.
func TestChartVantage(t *testing.T) {
	ns := namespace(t, "dbc-vantage")
	node := map[string]any{"kubernetes.io/hostname": cluster["DBCANARY_K8S_NODE"]}
	took := helmInstall(t, ns, "dbc", map[string]any{
		"mode":     "vantage",
		"vantages": []any{map[string]any{"name": "zone-a", "nodeSelector": node}, map[string]any{"name": "zone-b", "nodeSelector": node}},
		"config":   map[string]any{"targets": []any{noopTarget("engine-overhead", 1)}},
	})
	ps := waitReady(t, ns, podSelector, 2, 2*time.Minute)
	seen := []string{}
	for _, p := range ps {
		checkRuntime(t, p, "dbcanary")
		waitProbing(t, p, []string{"engine-overhead"}, 2*time.Minute)
		fams, err := scrape(p.IP)
		if err != nil {
			t.Fatal(err)
		}
		v := gauge(fams, "dbcanary_target_up", "vantage")
		want := p.Labels["dbcanary.io/vantage"]
		if _, ok := v[want]; !ok || len(v) != 1 {
			t.Errorf("pod %s (vantage %q): dbcanary_target_up by vantage %v", p.Name, want, v)
		}
		seen = append(seen, want)
	}
	sort.Strings(seen)
	if !slices.Equal(seen, []string{"zone-a", "zone-b"}) {
		t.Errorf("vantages of the pods: %v, want zone-a and zone-b", seen)
	}
	tested := helmTest(t, ns, "dbc")
	stack.Figure(t, "mode vantage (2 vantages): helm install --wait %s; helm test passed in %s", took.Round(100*time.Millisecond), tested.Round(100*time.Millisecond))
}

// TestChartSharded: mode sharded with 3 replicas and 12 targets: each target
// probed by exactly one replica; a replica deleted, the chart upgraded with a
// changed config and rolled back, with no target unprobed longer than
// reshardBound and none probed by two replicas at once.
func TestChartSharded(t *testing.T) {
	ns := namespace(t, "dbc-sharded")
	var targets []string
	var cfg []any
	for i := range 12 {
		name := fmt.Sprintf("noop-%02d", i)
		targets = append(targets, name)
		cfg = append(cfg, noopTarget(name, 2))
	}
	values := func(timeout string) map[string]any {
		return map[string]any{"mode": "sharded", "replicas": 3,
			"config": map[string]any{"global": map[string]any{"timeout": timeout}, "targets": cfg}}
	}
	sel := podSelector
	took := helmInstall(t, ns, "dbc", values("5s"))
	ps := waitReady(t, ns, sel, 3, 3*time.Minute)
	for _, p := range ps {
		checkRuntime(t, p, "dbcanary")
	}
	// Exactly one owner per target, the sum over the replicas' /metrics.
	owners := ownersOf(t, ps, targets)
	shares := map[string][]string{}
	for tg, p := range owners {
		shares[p] = append(shares[p], tg)
	}
	t.Logf("shares: %v", shares)
	tested := helmTest(t, ns, "dbc")

	// A replica deleted: its share is probed again by its new pod.
	victim := ps[1]
	t0 := time.Now()
	kubectl(t, "", "-n", ns, "delete", "pod", victim.Name, "--wait=false")
	var again pod
	for deadline := time.Now().Add(reshardBound); ; {
		for _, p := range pods(t, ns, sel) {
			if p.Name == victim.Name && p.UID != victim.UID && p.Ready && p.IP != "" {
				again = p
			}
		}
		if again.UID != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if again.UID == "" {
		t.Fatalf("pod %s not back and Ready within %s", victim.Name, reshardBound)
	}
	reshard := waitProbing(t, again, shares[victim.Name], reshardBound).Sub(t0)
	if reshard > reshardBound {
		t.Errorf("share of %s probed again after %s, bound %s", victim.Name, reshard, reshardBound)
	}
	ownersOf(t, waitReady(t, ns, sel, 3, time.Minute), targets)

	// helm upgrade (a changed config rolls the pods) and helm rollback.
	upgrade := watchRoll(t, ns, sel, targets, "upgrade", "dbc", chartDir(), "--namespace", ns, "--values", valuesFile(t, values("6s")), "--wait", "--timeout", "5m")
	rollback := watchRoll(t, ns, sel, targets, "rollback", "dbc", "1", "--namespace", ns, "--wait", "--timeout", "5m")
	ownersOf(t, waitReady(t, ns, sel, 3, time.Minute), targets)
	stack.Figure(t, "mode sharded (3 replicas, 12 targets): helm install --wait %s; helm test passed in %s; a replica deleted: its share probed again after %s (bound %s); "+
		"longest a target went unprobed: helm upgrade %s, helm rollback %s; targets probed by two replicas at once: %d",
		took.Round(100*time.Millisecond), tested.Round(100*time.Millisecond), reshard.Round(100*time.Millisecond), reshardBound,
		upgrade.maxGap.Round(100*time.Millisecond), rollback.maxGap.Round(100*time.Millisecond), len(upgrade.dups)+len(rollback.dups))
}

// ownersOf returns the one replica probing each target (failing when a
// target has none or several): the replicas' own /metrics.
func ownersOf(t *testing.T, ps []pod, targets []string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		by := map[string][]string{}
		for _, p := range ps {
			fams, err := scrape(p.IP)
			if err != nil {
				t.Fatalf("pod %s: %v", p.Name, err)
			}
			for tg, n := range opCounts(fams) {
				if n > 0 {
					by[tg] = append(by[tg], p.Name)
				}
			}
		}
		owners, bad := map[string]string{}, []string{}
		for _, tg := range targets {
			if len(by[tg]) == 1 {
				owners[tg] = by[tg][0]
			} else {
				bad = append(bad, fmt.Sprintf("%s: %v", tg, by[tg]))
			}
		}
		for tg := range by {
			if !slices.Contains(targets, tg) {
				bad = append(bad, fmt.Sprintf("unknown target %s: %v", tg, by[tg]))
			}
		}
		if len(bad) == 0 {
			return owners
		}
		if time.Now().After(deadline) {
			t.Fatalf("targets not probed by exactly one replica: %v", bad)
		}
		time.Sleep(time.Second)
	}
}

// roll is what watchRoll saw.
type roll struct {
	maxGap time.Duration // the longest any target went without a finished op
	dups   []string      // polls at which two replicas both finished ops of a target
}

// watchRoll runs `helm ARGS...` (an upgrade or a rollback that rolls the
// pods) while polling every replica's /metrics each second, until the
// release is rolled and every target has been probed since.
func watchRoll(t *testing.T, ns, sel string, targets []string, args ...string) roll {
	t.Helper()
	before := map[string]bool{}
	for _, p := range pods(t, ns, sel) {
		before[p.UID] = true
	}
	done := make(chan error, 1)
	go func() {
		cmd := kubeEnvCmd(helmBin, args...)
		_, err := run(cmd, "")
		done <- err
	}()
	last := map[string]float64{}        // podUID/target -> op count
	lastProbe := map[string]time.Time{} // target -> last poll it advanced
	start := time.Now()
	for _, tg := range targets {
		lastProbe[tg] = start
	}
	var r roll
	var finished time.Time
	var helmDone *time.Time
	for {
		now := time.Now()
		by := map[string][]string{}
		current := pods(t, ns, sel)
		for _, p := range current {
			if p.IP == "" {
				continue
			}
			fams, err := scrape(p.IP)
			if err != nil {
				continue // starting or gone
			}
			for tg, n := range opCounts(fams) {
				k := p.UID + "/" + tg
				if n > last[k] {
					by[tg] = append(by[tg], p.Name)
				}
				last[k] = n
			}
		}
		for tg, who := range by {
			if len(who) > 1 {
				r.dups = append(r.dups, fmt.Sprintf("%s at +%s: %v", tg, now.Sub(start).Round(time.Second), who))
			}
			r.maxGap = max(r.maxGap, now.Sub(lastProbe[tg]))
			lastProbe[tg] = now
		}
		if helmDone == nil {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("helm %s: %v", args[0], err)
				}
				helmDone = &now
			default:
			}
		}
		// Rolled: helm returned and every pod is a new one, Ready (helm's
		// --wait may return before the StatefulSet controller has begun).
		if helmDone != nil && finished.IsZero() && rolled(current, before) {
			finished = now
		}
		if helmDone != nil && finished.IsZero() && now.Sub(*helmDone) > reshardBound {
			t.Fatalf("helm %s: the pods not all replaced and Ready %s after helm returned", args[0], reshardBound)
		}
		if !finished.IsZero() {
			all := true
			for _, tg := range targets {
				all = all && lastProbe[tg].After(finished)
			}
			if all {
				break
			}
			if now.Sub(finished) > reshardBound {
				t.Fatalf("helm %s: targets not probed within %s after the roll: %v", args[0], reshardBound, lastProbe)
			}
		}
		time.Sleep(time.Second)
	}
	for _, tg := range targets {
		r.maxGap = max(r.maxGap, time.Since(lastProbe[tg]))
	}
	// The roll replaced every pod (the config checksum changed).
	for _, p := range waitReady(t, ns, sel, len(before), reshardBound) {
		if before[p.UID] {
			t.Errorf("helm %s: pod %s was not replaced", args[0], p.Name)
		}
	}
	if r.maxGap > reshardBound {
		t.Errorf("helm %s: a target went %s without a finished op, bound %s", args[0], r.maxGap, reshardBound)
	}
	if len(r.dups) > 0 {
		t.Errorf("helm %s: targets probed by two replicas at once: %v", args[0], r.dups)
	}
	t.Logf("helm %s: rolled in %s, longest gap %s", args[0], finished.Sub(start).Round(100*time.Millisecond), r.maxGap.Round(100*time.Millisecond))
	return r
}

// rolled: as many pods as before, none of them from before, all Ready.
func rolled(ps []pod, before map[string]bool) bool {
	if len(ps) != len(before) {
		return false
	}
	for _, p := range ps {
		if before[p.UID] || !p.Ready || p.Terminating {
			return false
		}
	}
	return true
}

// imageRE matches the image lines of the examples (ghcr.io/dbcanary/dbcanary:<tag>, the placeholder app).
var imageRE = regexp.MustCompile(`image: (ghcr\.io/dbcanary/dbcanary|registry\.example\.com/orders):\S+`)

// kustomized renders a kustomization with the test's images.
func kustomized(t *testing.T, dir string) string {
	t.Helper()
	y := kubectl(t, "", "kustomize", dir)
	return imageRE.ReplaceAllStringFunc(y, func(s string) string {
		if strings.Contains(s, "orders") {
			return "image: " + standinImage
		}
		return "image: " + imageRepo + ":" + imageTag
	})
}

// TestKustomizeBase: deploy/kubernetes/base with its ServiceMonitor component.
func TestKustomizeBase(t *testing.T) {
	ns := namespace(t, "dbc-kustomize")
	deploy := filepath.Join(stack.RepoRoot(), "deploy", "kubernetes")
	dir := t.TempDir()
	// kustomize takes no absolute paths: relative ones from the temporary directory.
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n",
		rel(filepath.Join(deploy, "base")), rel(filepath.Join(deploy, "components", "servicemonitor")))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	kubectl(t, kustomized(t, dir), "-n", ns, "apply", "-f", "-")
	ps := waitReady(t, ns, "app.kubernetes.io/name=dbcanary", 1, 3*time.Minute)
	checkRuntime(t, ps[0], "dbcanary")
	waitProbing(t, ps[0], []string{"engine-overhead"}, 2*time.Minute)
	if got := kubectl(t, "", "-n", ns, "get", "servicemonitor", "-o", "name"); !strings.Contains(got, "servicemonitor") {
		t.Errorf("no ServiceMonitor of the component: %q", got)
	}
	stack.Figure(t, "kustomize base + servicemonitor component: applied and Ready in %s", time.Since(t0).Round(100*time.Millisecond))
}

// TestSidecar: deploy/kubernetes/sidecar (2 replicas, the canary beside a
// stand-in application container, its PodMonitor component).
func TestSidecar(t *testing.T) {
	ns := namespace(t, "dbc-sidecar")
	// The example's RabbitMQ password Secret (no RabbitMQ here: the canary runs, its target is down).
	kubectl(t, "", "-n", ns, "create", "secret", "generic", "orders-dbcanary-rabbitmq", "--from-literal=password=unused")
	t0 := time.Now()
	kubectl(t, kustomized(t, filepath.Join(stack.RepoRoot(), "deploy", "kubernetes", "sidecar")), "-n", ns, "apply", "-f", "-")
	ps := waitReady(t, ns, "app.kubernetes.io/name=orders", 2, 3*time.Minute)
	for _, p := range ps {
		checkRuntime(t, p, "dbcanary")
		checkRuntime(t, p, "orders")
		fams, err := scrape(p.IP)
		if err != nil {
			t.Fatal(err)
		}
		if len(fams["dbcanary_target_up"].GetMetric()) == 0 {
			t.Errorf("pod %s: no dbcanary_target_up on the sidecar's port", p.Name)
		}
	}
	if got := kubectl(t, "", "-n", ns, "get", "podmonitor", "-o", "name"); !strings.Contains(got, "podmonitor") {
		t.Errorf("no PodMonitor of the component: %q", got)
	}
	stack.Figure(t, "sidecar example (2 pods, canary + stand-in app): applied and Ready in %s", time.Since(t0).Round(100*time.Millisecond))
}

// kubeEnvCmd is a command with the cluster's KUBECONFIG.
func kubeEnvCmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster["KUBECONFIG"])
	return cmd
}
