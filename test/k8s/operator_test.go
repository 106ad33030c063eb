//go:build integration

package k8s

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/pager"
	"github.com/dbcanary/dbcanary/test/stack"
)

// The monitoring stack prometheus-operator runs: a Prometheus 3 and an
// Alertmanager of this project's builds, selecting every ServiceMonitor,
// PodMonitor, PrometheusRule and AlertmanagerConfig of the cluster, so that
// what scrapes and pages is configured only by the chart's objects.
const monitoringYAML = `apiVersion: v1
kind: Namespace
metadata: {name: monitoring}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus, namespace: monitoring}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: dbcanary-test-prometheus}
rules:
- {apiGroups: [""], resources: [services, endpoints, pods], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dbcanary-test-prometheus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: dbcanary-test-prometheus}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: dbcanary, namespace: monitoring}
spec:
  image: %[1]s
  version: %[2]s
  replicas: 1
  serviceAccountName: prometheus
  scrapeInterval: 5s
  evaluationInterval: 5s
  serviceMonitorSelector: {}
  serviceMonitorNamespaceSelector: {}
  podMonitorSelector: {}
  podMonitorNamespaceSelector: {}
  ruleSelector: {}
  ruleNamespaceSelector: {}
  alerting:
    alertmanagers:
    - {namespace: monitoring, name: alertmanager-operated, port: web, apiVersion: v2}
---
apiVersion: monitoring.coreos.com/v1
kind: Alertmanager
metadata: {name: dbcanary, namespace: monitoring}
spec:
  image: %[3]s
  version: %[4]s
  replicas: 1
  alertmanagerConfigSelector: {}
  alertmanagerConfigNamespaceSelector: {}
`

// TestOperatorScrapesAndPages: prometheus-operator (run outside the cluster
// with the admin kubeconfig) manages a Prometheus 3 and an Alertmanager; the
// chart (sharded, 2 replicas) brings its ServiceMonitor, PrometheusRule and
// AlertmanagerConfig. Every replica's series reach Prometheus with job,
// namespace, pod and instance; the shipped rules load; DbcanaryExporterAbsent
// stays quiet; MinIO cut at its forwarder pages exactly once, with the
// runbook link, and resolves when it is back.
func TestOperatorScrapesAndPages(t *testing.T) {
	bins := operatorBinaries(t)
	promImg := buildImage(t, "prometheus", bins["prometheus"], "v3.15.0")
	amImg := buildImage(t, "alertmanager", bins["alertmanager"], "v0.31.1")
	reloaderImg := buildImage(t, "prometheus-config-reloader", bins["reloader"], "v0.85.0")
	startOperator(t, bins["operator"], reloaderImg)
	t.Cleanup(func() {
		_, _ = run(kubectlCmd("delete", "namespace", "monitoring", "--wait=true", "--timeout=120s"), "")
		_, _ = run(kubectlCmd("delete", "clusterrole,clusterrolebinding", "dbcanary-test-prometheus"), "")
	})
	kubectl(t, fmt.Sprintf(monitoringYAML, promImg, "v3.15.0", amImg, "v0.31.1"), "apply", "-f", "-")
	waitReady(t, "monitoring", "app.kubernetes.io/managed-by=prometheus-operator", 2, 3*time.Minute)
	prom := "http://" + net.JoinHostPort(podIP(t, "monitoring", "prometheus-dbcanary-0"), "9090")
	am := "http://" + net.JoinHostPort(podIP(t, "monitoring", "alertmanager-dbcanary-0"), "9093")

	// The pager on 127.0.0.1, reached by the Alertmanager pod through a forwarder on the gateway.
	hook := pager.NewWebhook(t, t.Logf)
	hookURL, err := url.Parse(hook.URL)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := toxi.CreateProxy("pager", net.JoinHostPort(cluster["DBCANARY_K8S_GATEWAY"], "0"), hookURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Delete() })
	// A proxy of its own to MinIO, to cut without disturbing the other tests.
	store, err := toxi.CreateProxy("minio-operator", net.JoinHostPort(cluster["DBCANARY_K8S_GATEWAY"], "0"), minio["DBCANARY_TEST_S3_ENDPOINT"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Delete() })

	ns := namespace(t, "dbc-operator")
	s3Secret(t, ns, "minio")
	target := s3Target("minio", "minio", nil)
	target["s3"].(map[string]any)["endpoint"] = "http://" + store.Listen
	t0 := time.Now()
	helmInstall(t, ns, "dbc", map[string]any{
		"mode": "sharded", "replicas": 2,
		"config":          map[string]any{"targets": []any{noopTarget("engine-overhead", 1), target}},
		"existingSecrets": []any{map[string]any{"name": "minio"}},
		"serviceMonitor":  map[string]any{"enabled": true, "interval": "5s"},
		"prometheusRule":  map[string]any{"enabled": true},
		"alertmanagerConfig": map[string]any{"enabled": true, "groupWait": "5s", "groupInterval": "10s",
			"receivers": map[string]any{"pager": map[string]any{"webhookConfigs": []any{map[string]any{"url": "http://" + fwd.Listen + "/" + pager.ReceiverPager}}}}},
	})
	pods := waitReady(t, ns, podSelector, 2, 2*time.Minute)

	// Every replica's series, with the labels the rules and boards select.
	up := waitQuery(t, prom, `up{job="dbcanary",namespace="`+ns+`"} == 1`, 2, 3*time.Minute)
	firstScrape := time.Since(t0)
	seen := map[string]bool{}
	for _, s := range up {
		if s["instance"] == "" || s["pod"] == "" {
			t.Errorf("series without instance or pod: %v", s)
		}
		seen[s["pod"]] = true
	}
	for _, p := range pods {
		if !seen[p.Name] {
			t.Errorf("no up{job=dbcanary} of pod %s in Prometheus: %v", p.Name, up)
		}
	}
	waitQuery(t, prom, `dbcanary_target_up{job="dbcanary",namespace="`+ns+`",target="minio"} == 1`, 1, 2*time.Minute)

	// The shipped rules, loaded from the PrometheusRule.
	rules := promRules(t, prom)
	if rules < 100 || !strings.Contains(fmt.Sprint(rulesNames(t, prom)), "DbcanaryExporterAbsent") {
		t.Errorf("Prometheus has %d rules loaded, want the shipped ones (DbcanaryExporterAbsent among them)", rules)
	}
	// Pending from before the install (no dbcanary yet), it must clear once
	// the replicas are scraped, and never page (counted below).
	waitQuery(t, prom, `ALERTS{alertname="DbcanaryExporterAbsent"}`, 0, time.Minute)
	before := len(hook.All())

	// One fault: the store cut at its forwarder.
	if err := store.Disable(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	page := waitNotification(t, hook, before, "firing", 6*time.Minute)
	paged := time.Since(cut)
	// A few group intervals more: nothing else pages.
	time.Sleep(30 * time.Second)
	var pages []string
	for _, n := range hook.All()[before:] {
		if isPage(n) && n.Status == "firing" {
			for _, a := range n.Alerts {
				pages = append(pages, pager.AlertString(a.Labels))
			}
		}
	}
	if len(pages) != 1 || !strings.HasPrefix(pages[0], "TargetDown/") {
		t.Errorf("pages after the cut: %v, want exactly one DbcanaryTargetDown", pages)
	}
	if runbook := alertAnnotation(t, am, "DbcanaryTargetDown", "runbook_url"); !strings.Contains(runbook, "runbooks.md#dbcanarytargetdown") {
		t.Errorf("DbcanaryTargetDown's runbook_url at the Alertmanager: %q", runbook)
	}

	// The store back: resolved.
	if err := store.Enable(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitNotification(t, hook, before+len(hook.All()[before:]), "resolved", 5*time.Minute)
	resolved := time.Since(back)
	sidecar := sidecarThroughOperator(t, prom)
	stack.Figure(t, "the sidecar example's PodMonitor: both sidecars' series in Prometheus %s after kubectl apply", sidecar.Round(time.Second))
	stack.Figure(t, "prometheus-operator %s, Prometheus 3.15.0, Alertmanager 0.31.1: first scrape of both replicas %s after helm install began; %d rules loaded; store cut -> %d page (%s) after %s; resolved %s after the store came back (first notification: %s)",
		strings.TrimPrefix(filepath.Base(filepath.Dir(bins["operator"])), "prometheus-operator-"), firstScrape.Round(time.Second), rules,
		len(pages), strings.Join(pages, ", "), paged.Round(time.Second), resolved.Round(time.Second), page.Status)
}

// sidecarThroughOperator applies the sidecar example (its PodMonitor
// component, 2 pods of the canary beside a stand-in application) and waits
// until the operator's Prometheus scrapes each sidecar once, with the labels
// the shipped rules and boards select: job="dbcanary" (the PodMonitor's
// jobLabel), namespace, pod and instance (the pod's address and the canary's
// port). It runs after the page checks and is deleted at once: its RabbitMQ
// target does not exist here, and DbcanaryTargetDown for it would page after 2m.
func sidecarThroughOperator(t *testing.T, prom string) time.Duration {
	t.Helper()
	ns := "dbc-op-sidecar"
	kubectl(t, "", "create", "namespace", ns)
	defer func() {
		if out, err := run(kubectlCmd("delete", "namespace", ns, "--wait=true", "--timeout=120s"), ""); err != nil {
			t.Logf("delete namespace %s: %v\n%s", ns, err, out)
		}
	}()
	kubectl(t, "", "-n", ns, "create", "secret", "generic", "orders-dbcanary-rabbitmq", "--from-literal=password=unused")
	t0 := time.Now()
	kubectl(t, kustomized(t, filepath.Join(stack.RepoRoot(), "deploy", "kubernetes", "sidecar")), "-n", ns, "apply", "-f", "-")
	ps := waitReady(t, ns, "app.kubernetes.io/name=orders", 2, 3*time.Minute)
	// Exactly one up series per pod: scraped once, by the PodMonitor alone.
	up := waitQuery(t, prom, `up{job="dbcanary",namespace="`+ns+`"} == 1`, 2, 8*time.Minute)
	took := time.Since(t0)
	byPod := map[string]map[string]string{}
	for _, s := range up {
		byPod[s["pod"]] = s
	}
	for _, p := range ps {
		s, ok := byPod[p.Name]
		if !ok {
			t.Errorf("no up{job=dbcanary} of sidecar pod %s: %v", p.Name, up)
			continue
		}
		if want := net.JoinHostPort(p.IP, metricsPort); s["instance"] != want {
			t.Errorf("pod %s: instance %q, want %s (the canary's port, not the application's)", p.Name, s["instance"], want)
		}
		if s["container"] != "dbcanary" {
			t.Errorf("pod %s: container %q, want dbcanary", p.Name, s["container"])
		}
	}
	// dbcanary's own series carry the same labels (what the rules aggregate and the boards filter on).
	tu := waitQuery(t, prom, `dbcanary_target_up{job="dbcanary",namespace="`+ns+`",target="orders-rabbitmq"}`, 2, 2*time.Minute)
	for _, s := range tu {
		if byPod[s["pod"]] == nil || s["instance"] != byPod[s["pod"]]["instance"] {
			t.Errorf("dbcanary_target_up %v: pod or instance unlike its up series %v", s, byPod)
		}
	}
	t.Logf("sidecar series: %v", up)
	return took
}

// operatorBinaries installs (cached) and returns the operator, the config
// reloader, Alertmanager and Prometheus 3.
func operatorBinaries(t *testing.T) map[string]string {
	t.Helper()
	tool := func(name string, args ...string) string {
		out, err := stack.Tool(name, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	tool("prometheus-operator", "install")
	tool("prometheus3", "install")
	return map[string]string{
		"operator":     tool("prometheus-operator", "path"),
		"reloader":     tool("prometheus-operator", "reloader-path"),
		"alertmanager": tool("prometheus-operator", "alertmanager-path"),
		"prometheus":   tool("prometheus3", "path"),
	}
}

// buildImage builds localhost/NAME:TAG FROM scratch holding binary as
// /bin/NAME (its entrypoint: the operator passes arguments only) and imports it.
func buildImage(t *testing.T, name, binary, tag string) string {
	t.Helper()
	img := "localhost/" + name + ":" + tag
	ctx := t.TempDir()
	b, err := os.ReadFile(binary)
	if err == nil {
		err = os.WriteFile(filepath.Join(ctx, name), b, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(fmt.Sprintf(
			"FROM scratch\nCOPY %[1]s /bin/%[1]s\nUSER 65534:65534\nENTRYPOINT [\"/bin/%[1]s\"]\n", name)), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	conf, err := stack.Tool("podman", "env")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("podman", "build", "--quiet", "--pull=never", "--layers=false", "-t", img, ctx)
	cmd.Env = append(os.Environ(), strings.TrimPrefix(strings.TrimSpace(conf), "export "))
	if _, err := run(cmd, ""); err != nil {
		t.Fatalf("podman build %s: %v", img, err)
	}
	if _, err := run(exec.Command("bash", filepath.Join(stack.Dir(), "k8s.sh"), "import", img), ""); err != nil {
		t.Fatalf("k8s.sh import %s: %v", img, err)
	}
	return img
}

// startOperator runs the operator outside the cluster until the test ends.
func startOperator(t *testing.T, bin, reloader string) {
	t.Helper()
	var log stack.Log
	cmd := exec.Command(bin, "--prometheus-config-reloader="+reloader, "--kubelet-service=",
		"--web.listen-address="+net.JoinHostPort("127.0.0.1", fmt.Sprint(stack.FreePort(t))))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster["KUBECONFIG"])
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("operator log:\n%s", log.String())
		}
	})
}

func podIP(t *testing.T, ns, name string) string {
	t.Helper()
	return strings.TrimSpace(kubectl(t, "", "-n", ns, "get", "pod", name, "-o", "jsonpath={.status.podIP}"))
}

// query runs an instant query and returns each series' labels.
func query(t *testing.T, prom, q string) []map[string]string {
	t.Helper()
	var r struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	getJSON(t, prom+"/api/v1/query?query="+url.QueryEscape(q), &r)
	var out []map[string]string
	for _, s := range r.Data.Result {
		out = append(out, s.Metric)
	}
	return out
}

// waitQuery waits until q returns n series.
func waitQuery(t *testing.T, prom, q string, n int, timeout time.Duration) []map[string]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := query(t, prom, q)
		if len(got) == n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d series after %s, want %d: %v", q, len(got), timeout, n, got)
		}
		time.Sleep(time.Second)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

type rulesAPI struct {
	Data struct {
		Groups []struct {
			Rules []struct {
				Name string `json:"name"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"data"`
}

// promRules is how many rules Prometheus has loaded.
func promRules(t *testing.T, prom string) int {
	t.Helper()
	return len(rulesNames(t, prom))
}

func rulesNames(t *testing.T, prom string) []string {
	t.Helper()
	var r rulesAPI
	getJSON(t, prom+"/api/v1/rules", &r)
	var names []string
	for _, g := range r.Data.Groups {
		for _, rl := range g.Rules {
			names = append(names, rl.Name)
		}
	}
	return names
}

// alertAnnotation is an annotation of an alert the Alertmanager holds.
func alertAnnotation(t *testing.T, am, alertname, key string) string {
	t.Helper()
	var alerts []struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
	getJSON(t, am+"/api/v2/alerts", &alerts)
	for _, a := range alerts {
		if a.Labels["alertname"] == alertname {
			return a.Annotations[key]
		}
	}
	return ""
}

// waitNotification waits for a pager notification of status after the first skip ones.
func waitNotification(t *testing.T, hook *pager.Webhook, skip int, status string, timeout time.Duration) pager.Notification {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		all := hook.All()
		for _, n := range all[min(skip, len(all)):] {
			if isPage(n) && n.Status == status {
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s page within %s (notifications: %d)", status, timeout, len(all)-skip)
		}
		time.Sleep(time.Second)
	}
}

// isPage: a notification to the pager receiver (the AlertmanagerConfig's
// receivers are namespaced, "<ns>/<name>/pager": pager records the path it
// was posted to).
func isPage(n pager.Notification) bool { return strings.HasPrefix(n.Receiver, pager.ReceiverPager) }
