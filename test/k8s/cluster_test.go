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
	"slices"
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
	pid := taskPID(t, p, container)
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

// taskPID is the host PID of the container's first process (its containerd task).
func taskPID(t *testing.T, p pod, container string) string {
	t.Helper()
	id := p.Containers[container]
	if id == "" {
		t.Fatalf("pod %s has no container %s", p.Name, container)
	}
	out, err := run(exec.Command("ctr", "-a", cluster["DBCANARY_K8S_CONTAINERD_SOCK"], "-n", "k8s.io", "tasks", "ls"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return f[1]
		}
	}
	t.Fatalf("pod %s container %s: no containerd task %s", p.Name, container, id)
	return ""
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

// helmTest runs `helm test` on release (the chart's check-endpoint hook) and
// returns how long it took; the hook's log must say its check passed.
func helmTest(t *testing.T, ns, release string) time.Duration {
	t.Helper()
	t0 := time.Now()
	out := helm(t, "test", release, "--namespace", ns, "--logs", "--timeout", "3m")
	took := time.Since(t0)
	if !strings.Contains(out, "Succeeded") || !strings.Contains(out, ": OK: /-/ready 200; /metrics parses") {
		t.Errorf("helm test %s: no Succeeded hook with an OK check:\n%s", release, out)
	}
	return took
}

// helmTestFails scales workload to no pod and checks that `helm test` then
// fails, its hook's log naming the Service's URL and what failed.
func helmTestFails(t *testing.T, ns, release, workload string) time.Duration {
	t.Helper()
	kubectl(t, "", "-n", ns, "scale", workload, "--replicas=0")
	waitReady(t, ns, podSelector, 0, 2*time.Minute)
	t0 := time.Now()
	out, err := run(kubeEnvCmd(helmBin, "test", release, "--namespace", ns, "--timeout", "3m"), "")
	took := time.Since(t0)
	if err == nil {
		t.Fatalf("helm test passed with no pod behind the Service:\n%s", out)
	}
	logs := kubectl(t, "", "-n", ns, "logs", release+"-dbcanary-test")
	if !strings.Contains(logs, "check-endpoint: http://") || !strings.Contains(logs, ": FAILED: ") || !strings.Contains(logs, "/-/ready") {
		t.Errorf("the failed hook's log does not name the URL and what failed:\n%s", logs)
	}
	t.Logf("helm test with no pod behind the Service: %v\nthe hook's log: %s", err, logs)
	return took
}

// checkPDB waits until the disruption controller has counted the release's
// pods under the PodDisruptionBudget: it selects them (expected, healthy) and
// allows the disruptions it should.
func checkPDB(t *testing.T, ns, name string, pods, allowed int) {
	t.Helper()
	want := fmt.Sprintf("%d %d %d", pods, pods, allowed)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		got := kubectl(t, "", "-n", ns, "get", "pdb", name, "-o",
			"jsonpath={.status.expectedPods} {.status.currentHealthy} {.status.disruptionsAllowed}")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("PodDisruptionBudget %s: expectedPods currentHealthy disruptionsAllowed = %q, want %q", name, got, want)
			return
		}
	}
}

// checkResources proves from the container's cgroups (v1, this node's), not
// from the pod spec, that the kubelet applied the chart's resources: the
// memory limit in bytes and the CPU request as cpu.shares.
func checkResources(t *testing.T, ns string, p pod, container string, memLimit, cpuShares int64) {
	t.Helper()
	pid := taskPID(t, p, container)
	cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	read := func(controller, file string) string {
		for _, line := range strings.Split(string(cg), "\n") {
			// hierarchy-ID:controller-list:cgroup-path
			f := strings.SplitN(line, ":", 3)
			if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
				b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", f[1], f[2], file))
				if err != nil {
					t.Errorf("pod %s container %s: %v", p.Name, container, err)
				}
				return strings.TrimSpace(string(b))
			}
		}
		t.Errorf("pod %s container %s: no %s cgroup in\n%s", p.Name, container, controller, cg)
		return ""
	}
	if got := read("memory", "memory.limit_in_bytes"); got != fmt.Sprint(memLimit) {
		t.Errorf("pod %s container %s: memory.limit_in_bytes %s, want %d", p.Name, container, got, memLimit)
	}
	if got := read("cpu", "cpu.shares"); got != fmt.Sprint(cpuShares) {
		t.Errorf("pod %s container %s: cpu.shares %s, want %d", p.Name, container, got, cpuShares)
	}
	qos := kubectl(t, "", "-n", ns, "get", "pod", p.Name, "-o", "jsonpath={.status.qosClass}")
	if qos != "Burstable" {
		t.Errorf("pod %s: qosClass %q, want Burstable (requests below limits)", p.Name, qos)
	}
}

// evictionRefused asks the API server to evict the pod (what kubectl drain
// and autoscalers do) and checks that its PodDisruptionBudget refuses.
func evictionRefused(t *testing.T, ns, name string) {
	t.Helper()
	eviction := fmt.Sprintf(`{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": %q, "namespace": %q}}`, name, ns)
	out, err := run(kubectlCmd("create", "--raw", "/api/v1/namespaces/"+ns+"/pods/"+name+"/eviction", "-f", "-"), eviction)
	if err == nil || !strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("eviction of pod %s: %v %s, want it refused by the PodDisruptionBudget", name, err, out)
		return
	}
	t.Logf("eviction of pod %s refused: %s", name, strings.TrimSpace(err.Error()))
}
