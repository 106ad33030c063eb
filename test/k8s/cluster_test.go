//go:build integration

package k8s

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/test/stack"
)

// metricsPort is the chart's (and the examples') metrics port.
const metricsPort = "19190"

func kubectlCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(cluster["DBCANARY_K8S_BIN"], "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster["KUBECONFIG"])
	return cmd
}

// kubectl runs kubectl, failing the test on an error; stdin, if not empty, is its input.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := run(kubectlCmd(args...), stdin)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// helm runs helm against the cluster, failing the test on an error.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helmBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster["KUBECONFIG"], "HELM_CACHE_HOME="+t.TempDir(),
		"HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := run(cmd, "")
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// run runs cmd with stdin and returns its stdout; the error carries stderr.
func run(cmd *exec.Cmd, stdin string) (string, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%v\n%s%s", err, out.String(), errb.String())
	}
	return out.String(), nil
}

// namespace creates a namespace for one test and deletes it when the test ends.
func namespace(t *testing.T, name string) string {
	t.Helper()
	kubectl(t, "", "create", "namespace", name)
	t.Cleanup(func() {
		if out, err := run(kubectlCmd("delete", "namespace", name, "--wait=true", "--timeout=120s"), ""); err != nil {
			t.Logf("delete namespace %s: %v\n%s", name, err, out)
		}
	})
	return name
}

// helmInstall installs the chart as release into ns with values and returns
// how long `helm install --wait` took. The release is uninstalled with the namespace.
func helmInstall(t *testing.T, ns, release string, values map[string]any) time.Duration {
	t.Helper()
	t0 := time.Now()
	helm(t, "install", release, chartDir(), "--namespace", ns, "--values", valuesFile(t, values), "--wait", "--timeout", "5m")
	return time.Since(t0)
}

func chartDir() string { return filepath.Join(stack.RepoRoot(), "deploy", "helm", "dbcanary") }

// valuesFile writes values (merged over the image and a pullPolicy of Never) to a file.
func valuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	v := map[string]any{"image": map[string]any{"repository": imageRepo, "tag": imageTag, "pullPolicy": "Never"}}
	for k, x := range values {
		v[k] = x
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// pod is what the tests read of a Pod.
type pod struct {
	Name, UID, IP string
	Ready         bool
	Terminating   bool
	Labels        map[string]string
	// Containers maps a container's name to its containerd id.
	Containers map[string]string
	Restarts   int
}

// pods lists the pods of ns matching selector.
func pods(t *testing.T, ns, selector string) []pod {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string            `json:"name"`
				UID               string            `json:"uid"`
				Labels            map[string]string `json:"labels"`
				DeletionTimestamp *string           `json:"deletionTimestamp"`
			} `json:"metadata"`
			Status struct {
				PodIP      string `json:"podIP"`
				Conditions []struct {
					Type, Status string
				} `json:"conditions"`
				ContainerStatuses []struct {
					Name         string `json:"name"`
					ContainerID  string `json:"containerID"`
					RestartCount int    `json:"restartCount"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	out := kubectl(t, "", "-n", ns, "get", "pods", "-l", selector, "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get pods: %v", err)
	}
	var ps []pod
	for _, it := range list.Items {
		p := pod{Name: it.Metadata.Name, UID: it.Metadata.UID, IP: it.Status.PodIP, Labels: it.Metadata.Labels,
			Terminating: it.Metadata.DeletionTimestamp != nil, Containers: map[string]string{}}
		for _, c := range it.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				p.Ready = true
			}
		}
		for _, c := range it.Status.ContainerStatuses {
			p.Containers[c.Name] = strings.TrimPrefix(c.ContainerID, "containerd://")
			p.Restarts += c.RestartCount
		}
		ps = append(ps, p)
	}
	return ps
}

// waitReady waits until exactly n pods match selector, none terminating, all Ready.
func waitReady(t *testing.T, ns, selector string, n int, timeout time.Duration) []pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ps := pods(t, ns, selector)
		ready := 0
		for _, p := range ps {
			if p.Ready && !p.Terminating {
				ready++
			}
		}
		if ready == n && len(ps) == n {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: %d of %d pods Ready after %s (%d listed)\n%s", ns, selector, ready, n, timeout, len(ps),
				kubectl(t, "", "-n", ns, "describe", "pods", "-l", selector))
		}
		time.Sleep(time.Second)
	}
}

// scrape reads a pod's /metrics.
func scrape(ip string) (map[string]*dto.MetricFamily, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(ip, metricsPort) + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// opCounts sums dbcanary_op_latency_seconds's sample counts (finished ops,
// any result) by target.
func opCounts(fams map[string]*dto.MetricFamily) map[string]float64 {
	n := map[string]float64{}
	for _, m := range fams["dbcanary_op_latency_seconds"].GetMetric() {
		n[label(m, "target")] += float64(m.GetHistogram().GetSampleCount())
	}
	return n
}

// gauge is a gauge's value by the given label.
func gauge(fams map[string]*dto.MetricFamily, name, by string) map[string]float64 {
	v := map[string]float64{}
	for _, m := range fams[name].GetMetric() {
		v[label(m, by)] += m.GetGauge().GetValue()
	}
	return v
}

// waitProbing waits until the pod's /metrics shows a finished op of every
// target and returns when it first did.
func waitProbing(t *testing.T, p pod, targets []string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		fams, err := scrape(p.IP)
		if err == nil {
			n := opCounts(fams)
			missing := []string{}
			for _, tg := range targets {
				if n[tg] == 0 {
					missing = append(missing, tg)
				}
			}
			if len(missing) == 0 {
				return time.Now()
			}
			last = fmt.Sprintf("no finished op yet of %v", missing)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %s after %s", p.Name, last, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkRuntime proves from the kernel's view of the container's first
// process, not from the pod spec, that it runs as uid and gid 65532 on a
// read-only root file system.
func checkRuntime(t *testing.T, p pod, container string) {
	t.Helper()
	id := p.Containers[container]
	if id == "" {
		t.Fatalf("pod %s has no container %s", p.Name, container)
	}
	out, err := run(exec.Command("ctr", "-a", cluster["DBCANARY_K8S_CONTAINERD_SOCK"], "-n", "k8s.io", "tasks", "ls"), "")
	if err != nil {
		t.Fatal(err)
	}
	pid := ""
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			pid = f[1]
		}
	}
	if pid == "" {
		t.Fatalf("pod %s container %s: no containerd task %s", p.Name, container, id)
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") {
			for _, id := range f[1:] {
				if id != "65532" {
					t.Errorf("pod %s container %s: %s (want 65532 everywhere)", p.Name, container, line)
					break
				}
			}
		}
	}
	mounts, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		// mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ...
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			if !strings.HasPrefix(f[5], "ro,") && f[5] != "ro" {
				t.Errorf("pod %s container %s: root file system mounted %s, want ro", p.Name, container, f[5])
			}
			return
		}
	}
	t.Errorf("pod %s container %s: no / in its mountinfo", p.Name, container)
}

// s3Secret creates the Secret holding MinIO's keys in ns (keys access-key, secret-key).
func s3Secret(t *testing.T, ns, name string) {
	t.Helper()
	read := func(key string) string {
		b, err := os.ReadFile(minio[key])
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	kubectl(t, "", "-n", ns, "create", "secret", "generic", name,
		"--from-literal=access-key="+read("DBCANARY_TEST_S3_ACCESS_KEY_FILE"),
		"--from-literal=secret-key="+read("DBCANARY_TEST_S3_SECRET_KEY_FILE"))
}

// s3Target is a dbcanary s3 target on MinIO through the forwarder, keys from
// the Secret secret mounted by the chart's existingSecrets.
func s3Target(name, secret string, extra map[string]any) map[string]any {
	s3 := map[string]any{
		"endpoint":               "http://" + s3Endpoint,
		"region":                 "us-east-1",
		"bucket":                 "dbcanary-k8s",
		"create_bucket":          true,
		"access_key_id_file":     "/etc/dbcanary/secrets/" + secret + "/access-key",
		"secret_access_key_file": "/etc/dbcanary/secrets/" + secret + "/secret-key",
	}
	for k, v := range extra {
		s3[k] = v
	}
	return map[string]any{"name": name, "backend": "s3", "timeout": "10s", "s3": s3}
}

// noopTarget is a target that measures the engine only, at rate ops/s.
func noopTarget(name string, rate float64) map[string]any {
	return map[string]any{"name": name, "backend": "noop", "ops": map[string]any{"noop": map[string]any{"rate": rate}}}
}
