//go:build integration

package deploy

// The sidecar example's scrape contract for a Prometheus without the operator:
// the documented scrape job (deploy/kubernetes/sidecar/prometheus-scrape.yml),
// run by a real Prometheus against a real dbcanary, gives the canary's series
// the job the shipped alerts select, once.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/dbcanary/dbcanary/test/stack"
)

var sidecarScrapeFile = filepath.Join(repoRoot, "deploy", "kubernetes", "sidecar", "prometheus-scrape.yml")

// freeAddr is a 127.0.0.1 address nothing listens on (yet).
func freeAddr(t *testing.T) string { t.Helper(); return stack.FreeAddr(t) }

// startProcess runs a command until the test ends (killed by its PID), its output kept for failures.
func startProcess(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, logs.String())
		}
	})
}

// waitFor polls cond until it holds, failing the test after a generous deadline.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s:\n%s", what, detail)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func httpOK(u string) (bool, string) {
	resp, err := http.Get(u)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// podTargets are the targets Prometheus's kubernetes_sd (role pod) makes of
// one pod of d: one per container port, with its __meta_kubernetes_* labels;
// addrs maps each containerPort to the loopback address standing in for it.
func podTargets(d *appsv1.Deployment, pod string, addrs map[int32]string) []map[string]any {
	tpl := d.Spec.Template
	common := map[string]string{
		"__meta_kubernetes_namespace":     d.Namespace,
		"__meta_kubernetes_pod_name":      pod,
		"__meta_kubernetes_pod_ip":        "127.0.0.1",
		"__meta_kubernetes_pod_ready":     "true",
		"__meta_kubernetes_pod_phase":     "Running",
		"__meta_kubernetes_pod_uid":       "00000000-0000-0000-0000-000000000001",
		"__meta_kubernetes_pod_node_name": "node-1",
	}
	for k, v := range tpl.Labels {
		n := invalidLabelChars.ReplaceAllString(k, "_")
		common["__meta_kubernetes_pod_label_"+n] = v
		common["__meta_kubernetes_pod_labelpresent_"+n] = "true"
	}
	for k, v := range tpl.Annotations {
		n := invalidLabelChars.ReplaceAllString(k, "_")
		common["__meta_kubernetes_pod_annotation_"+n] = v
		common["__meta_kubernetes_pod_annotationpresent_"+n] = "true"
	}
	var groups []map[string]any
	for _, c := range tpl.Spec.Containers {
		for _, p := range c.Ports {
			ls := map[string]string{}
			for k, v := range common {
				ls[k] = v
			}
			ls["__meta_kubernetes_pod_container_name"] = c.Name
			ls["__meta_kubernetes_pod_container_port_name"] = p.Name
			ls["__meta_kubernetes_pod_container_port_number"] = strconv.Itoa(int(p.ContainerPort))
			ls["__meta_kubernetes_pod_container_port_protocol"] = "TCP"
			groups = append(groups, map[string]any{"targets": []string{addrs[p.ContainerPort]}, "labels": ls})
		}
	}
	return groups
}

// promQuery runs an instant query and returns the result's label sets.
func promQuery(promURL, q string) ([]map[string]string, error) {
	resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		return nil, fmt.Errorf("query %s: status %q: %v", q, r.Status, err)
	}
	var out []map[string]string
	for _, s := range r.Data.Result {
		out = append(out, s.Metric)
	}
	return out, nil
}

// TestSidecarScrapeConfig: promtool accepts the documented scrape job (with
// file_sd in place of kubernetes_sd, which Debian's build lacks), and a real Prometheus running it (and an annotation-based kubernetes-pods job)
// on the targets kubernetes_sd would make of the rendered sidecar example
// scrapes the canary once, as job="dbcanary" with its namespace and pod,
// never the application's port: absent(up{job="dbcanary"}) is empty, so
// DbcanaryExporterAbsent stays quiet.
func TestSidecarScrapeConfig(t *testing.T) {
	if _, err := stack.Script("prometheus", "install"); err != nil {
		t.Fatalf("installing Prometheus: %v", err)
	}
	want := shippedJob(t, rulesFile(t))

	objs := kustomizeOverlay(t, "resources: [../sidecar]\nnamePrefix: shop-\nnamespace: shop\n")
	d := onlyKind[appsv1.Deployment](t, objs, "Deployment")

	// The canary: the real binary on a loopback port, standing in for the container's 19190.
	canaryAddr := freeAddr(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dbcanary.yaml")
	if err := os.WriteFile(cfg, []byte("targets:\n  - name: engine-overhead\n    backend: noop\n    ops: {noop: {rate: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	canary := exec.Command(dbcanary(t), "run", "--config.file", cfg, "--web.listen-address", canaryAddr)
	canary.Env = append(os.Environ(), "DBCANARY_INSTANCE_ID=shop-orders-0")
	startProcess(t, "dbcanary", canary)
	// The application: a metrics endpoint of its own that must never get the canary's job.
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "orders_requests_total 1")
	}))
	t.Cleanup(app.Close)
	addrs := map[int32]string{8080: strings.TrimPrefix(app.URL, "http://")}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "dbcanary" {
			for _, p := range c.Ports {
				addrs[p.ContainerPort] = canaryAddr
			}
		}
	}
	const pod = "shop-orders-5d8f7c9b4-x2k9q"
	targets := podTargets(d, pod, addrs)
	for _, g := range targets {
		if g["targets"].([]string)[0] == "" {
			t.Fatalf("no stand-in address for target %v", g["labels"])
		}
	}
	sdFile := filepath.Join(dir, "pods.json")
	b, err := json.Marshal(targets)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sdFile, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// The documented job with file_sd in place of kubernetes_sd (same targets, same
	// labels), scraping every second, beside the usual annotation job.
	raw, err := os.ReadFile(sidecarScrapeFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(raw, &doc); err != nil || len(doc.ScrapeConfigs) != 1 {
		t.Fatalf("%s: want one scrape config: %v", sidecarScrapeFile, err)
	}
	job := doc.ScrapeConfigs[0]
	// Debian's Prometheus is built without kubernetes_sd: the discovery block is
	// checked here, the rest of the job by promtool and the Prometheus below.
	if sd, _ := json.Marshal(job["kubernetes_sd_configs"]); string(sd) != `[{"role":"pod"}]` {
		t.Fatalf("the documented job discovers %s, want kubernetes_sd_configs [{role: pod}]", sd)
	}
	delete(job, "kubernetes_sd_configs")
	fileSD := []map[string]any{{"files": []string{sdFile}, "refresh_interval": "1s"}}
	job["file_sd_configs"] = fileSD
	job["scrape_interval"] = "1s"
	annotationJob := map[string]any{
		"job_name":        "kubernetes-pods",
		"scrape_interval": "1s",
		"file_sd_configs": fileSD,
		"relabel_configs": []map[string]any{{
			"source_labels": []string{"__meta_kubernetes_pod_annotation_prometheus_io_scrape"},
			"action":        "keep",
			"regex":         "true",
		}},
	}
	promCfg, err := yaml.Marshal(map[string]any{"scrape_configs": []map[string]any{job, annotationJob}})
	if err != nil {
		t.Fatal(err)
	}
	promFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promFile, promCfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("promtool", "check", "config", promFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config (the documented job with file_sd): %v\n%s\n%s", err, out, promCfg)
	}
	promAddr := freeAddr(t)
	startProcess(t, "prometheus", exec.Command("prometheus", "--config.file="+promFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn"))
	promURL := "http://" + promAddr
	waitFor(t, "dbcanary is ready", func() (bool, string) { return httpOK("http://" + canaryAddr + "/-/ready") })
	waitFor(t, "Prometheus is ready", func() (bool, string) { return httpOK(promURL + "/-/ready") })

	// Wait until the canary has been scraped, then look at everything that was.
	waitFor(t, `up{job="`+want+`"} == 1`, func() (bool, string) {
		r, err := promQuery(promURL, `up{job="`+want+`"} == 1`)
		return err == nil && len(r) > 0, fmt.Sprint(r, err)
	})
	ups, err := promQuery(promURL, "up")
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 1 {
		t.Fatalf("%d scrape targets %v, want the canary alone: the application's port or an annotation job is scraped too", len(ups), ups)
	}
	if u := ups[0]; u["job"] != want || u["instance"] != canaryAddr || u["namespace"] != "shop" || u["pod"] != pod {
		t.Errorf("the canary is scraped as %v, want job=%s instance=%s namespace=shop pod=%s", u, want, canaryAddr, pod)
	}
	jobs, err := promQuery(promURL, `count by (job) ({__name__=~"dbcanary_.+"})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0]["job"] != want {
		t.Errorf("dbcanary's series carry the jobs %v, want %s alone", jobs, want)
	}
	// The expression of DbcanaryExporterAbsent, as the shipped rules write it.
	expr := regexp.MustCompile(`absent\(up\{job="[^"]*"\}[^\n]*`).FindString(string(rulesFile(t)))
	if expr == "" {
		t.Fatal("the rules have no absent(up{job=...}) alert")
	}
	if r, err := promQuery(promURL, expr); err != nil || len(r) != 0 {
		t.Errorf("%s = %v (%v): DbcanaryExporterAbsent would fire", expr, r, err)
	}
}
