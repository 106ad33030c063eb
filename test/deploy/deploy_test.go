// Package deploy tests the deployment artefacts: the Helm chart, the
// kustomize manifests, the systemd unit and the Dockerfile. Every rendered
// Kubernetes object is decoded strictly into its API type, so a misspelt or
// misplaced field fails here rather than at kubectl apply.
package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"

	"github.com/dbcanary/dbcanary/test/stack"
)

var (
	repoRoot = stack.RepoRoot()
	chartDir = filepath.Join(repoRoot, "deploy", "helm", "dbcanary")
)

// RuleGroup is a Prometheus rule group as both a rule file and a PrometheusRule hold it.
type RuleGroup struct {
	Name                    string            `json:"name"`
	Interval                string            `json:"interval,omitempty"`
	QueryOffset             string            `json:"query_offset,omitempty"`
	Limit                   *int              `json:"limit,omitempty"`
	PartialResponseStrategy string            `json:"partial_response_strategy,omitempty"`
	Labels                  map[string]string `json:"labels,omitempty"`
	Rules                   []Rule            `json:"rules"`
}

// Rule is one recording or alerting rule of a RuleGroup.
type Rule struct {
	Record        string            `json:"record,omitempty"`
	Alert         string            `json:"alert,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// PrometheusRule is monitoring.coreos.com/v1 PrometheusRule.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}

// kinds maps apiVersion/kind to the type a rendered object must decode into.
var kinds = map[string]func() any{
	"v1/ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"v1/Service":                    func() any { return &corev1.Service{} },
	"v1/ServiceAccount":             func() any { return &corev1.ServiceAccount{} },
	"v1/Pod":                        func() any { return &corev1.Pod{} }, // the helm test hook
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":           func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                  func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PodMonitor":     func() any { return &monitoringv1.PodMonitor{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &PrometheusRule{} },
	// prometheus-operator's own API types: strict decoding rejects any field it does not know.
	"monitoring.coreos.com/v1alpha1/AlertmanagerConfig": func() any { return &monitoringv1alpha1.AlertmanagerConfig{} },
}

// objects is a rendered manifest stream, decoded; key "Kind/name".
type objects map[string]any

func (o objects) keys() []string {
	var ks []string
	for k := range o {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func get[T any](t *testing.T, objs objects, key string) *T {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("no %s rendered; have %v", key, objs.keys())
	}
	v, ok := o.(*T)
	if !ok {
		t.Fatalf("%s is a %T", key, o)
	}
	return v
}

// decodeStrict splits a multi-document YAML stream and decodes every object
// into its API type, failing on unknown or duplicate fields and unknown kinds.
func decodeStrict(t *testing.T, manifest []byte) objects {
	t.Helper()
	objs := objects{}
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading manifests: %v", err)
		}
		var tm metav1.TypeMeta
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("not a Kubernetes object: %v\n%s", err, doc)
		}
		if tm.Kind == "" {
			continue // a document holding only comments
		}
		_ = yaml.Unmarshal(doc, &meta)
		gvk := tm.APIVersion + "/" + tm.Kind
		newObj, ok := kinds[gvk]
		if !ok {
			t.Fatalf("unexpected object %s %s", gvk, meta.Metadata.Name)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s %s does not decode strictly: %v\n%s", gvk, meta.Metadata.Name, err, doc)
		}
		key := tm.Kind + "/" + meta.Metadata.Name
		if _, dup := objs[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		objs[key] = obj
	}
	return objs
}

// helm returns the helm binary test/tools/helm.sh installs (make deps); a
// missing helm fails the test (it is never installed by a unit test, nor
// skipped).
func helm(t *testing.T) string {
	t.Helper()
	return stack.Installed(t, "helm", "path")
}

// chartCopy copies the chart as committed (with files/dbcanary-rules.yml) to a
// temp dir, so a concurrent `make chart-rules` cannot change it under a test.
func chartCopy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "dbcanary")
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// rulesFile is the generated rule file, alerts/dbcanary-rules.yml.
func rulesFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "alerts", "dbcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chartRulesFile is the chart's copy of the rules, files/dbcanary-rules.yml:
// what its PrometheusRule renders (TestChartRulesUpToDate keeps it equal to rulesFile).
func chartRulesFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "dbcanary-rules.yml"))
	if err != nil {
		t.Fatalf("%v: run `make chart-rules`", err)
	}
	return b
}

// template runs helm template as release "dbcanary"; values are files' contents.
func template(t *testing.T, chart string, values ...string) ([]byte, error) {
	t.Helper()
	return templateRelease(t, "dbcanary", chart, values...)
}

// templateRelease runs helm template as the given release in namespace monitoring.
func templateRelease(t *testing.T, release, chart string, values ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, chart, "--namespace", "monitoring"}
	for i, v := range values {
		f := filepath.Join(t.TempDir(), fmt.Sprintf("values-%d.yaml", i))
		if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	cmd := exec.Command(helm(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func mustTemplate(t *testing.T, chart string, values ...string) objects {
	t.Helper()
	out, err := template(t, chart, values...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeStrict(t, out)
}

// onlyKind returns the single object of a kind.
func onlyKind[T any](t *testing.T, objs objects, kind string) *T {
	t.Helper()
	var found []string
	for _, k := range objs.keys() {
		if strings.HasPrefix(k, kind+"/") {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s, have %v", kind, found)
	}
	return get[T](t, objs, found[0])
}

const allOptions = `
mode: sharded
replicas: 3
image: {repository: registry.example.com/dbcanary, tag: v1.2.3, pullPolicy: Always}
imagePullSecrets: [{name: regcred}]
config:
  global: {timeout: 3s, max_in_flight: 4}
  targets:
    - name: rabbitmq-prod
      backend: rabbitmq
      labels: {env: prod}
      rabbitmq:
        url: amqps://rabbitmq.messaging.svc:5671/dbcanary
        username: dbcanary
        password_file: /etc/dbcanary/secrets/dbcanary-rabbitmq/password
    - name: engine-overhead
      backend: noop
existingSecrets:
  - name: dbcanary-rabbitmq
  - name: dbcanary-s3
    items: [{key: secret-key, path: secret_key}]
webConfig: {existingSecret: dbcanary-web, key: web.yml}
logLevel: debug
logFormat: json
extraArgs: [--shutdown.grace-period=20s]
extraEnv: [{name: GOMEMLIMIT, value: 200MiB}]
extraVolumes: [{name: scratch, emptyDir: {}}]
extraVolumeMounts: [{name: scratch, mountPath: /scratch}]
extraContainers:
  - name: reloader
    image: ghcr.io/jimmidyson/configmap-reload:v0.14.0
    args: [--volume-dir=/etc/dbcanary, --webhook-url=http://127.0.0.1:19190/-/reload]
podAnnotations: {team: storage}
podLabels: {tier: monitoring}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: monitoring, effect: NoSchedule}]
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app.kubernetes.io/name: dbcanary}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector: {matchLabels: {app.kubernetes.io/name: dbcanary}}
priorityClassName: monitoring
serviceAccount: {create: true, name: canary, annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/dbcanary"}}
service: {type: ClusterIP, port: 19191, annotations: {a: b}}
serviceMonitor:
  enabled: true
  labels: {release: kube-prometheus-stack}
  interval: 15s
  scrapeTimeout: 10s
  scheme: https
  tlsConfig: {insecureSkipVerify: true}
  basicAuth: {username: {name: dbcanary-web, key: user}, password: {name: dbcanary-web, key: pass}}
  relabelings: [{sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: node}]
  metricRelabelings: [{sourceLabels: [__name__], regex: go_.*, action: drop}]
prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}
podDisruptionBudget: {enabled: true, minAvailable: 2}
`

func TestChartDefaults(t *testing.T) {
	objs := mustTemplate(t, chartCopy(t))
	if got, want := objs.keys(), []string{"ConfigMap/dbcanary", "Deployment/dbcanary", "Pod/dbcanary-test", "Service/dbcanary", "ServiceAccount/dbcanary"}; !slices.Equal(got, want) {
		t.Fatalf("rendered %v, want %v", got, want)
	}
	d := get[appsv1.Deployment](t, objs, "Deployment/dbcanary")
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas %d, want 1", *d.Spec.Replicas)
	}
	checkPodHardening(t, d.Spec.Template)
	c := d.Spec.Template.Spec.Containers[0]
	wantArgs := []string{"run", "--config.file=/etc/dbcanary/dbcanary.yaml", "--web.listen-address=:19190", "--log.level=info", "--log.format=logfmt"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if c.Image != "ghcr.io/dbcanary/dbcanary:0.1.0" {
		t.Errorf("image %s", c.Image)
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation: a config change would not roll the pods")
	}
	svc := get[corev1.Service](t, objs, "Service/dbcanary")
	if p := svc.Spec.Ports[0]; p.Port != 19190 || p.TargetPort.StrVal != "http-metrics" {
		t.Errorf("service port %+v", p)
	}
	if !reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("service selector %v != deployment selector %v", svc.Spec.Selector, d.Spec.Selector.MatchLabels)
	}
	checkConfig(t, get[corev1.ConfigMap](t, objs, "ConfigMap/dbcanary"))
}

// checkPodHardening asserts the security properties every dbcanary pod has.
func checkPodHardening(t *testing.T, pt corev1.PodTemplateSpec) {
	t.Helper()
	ps := pt.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", ps)
	}
	if ps != nil && (ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", ps.SeccompProfile)
	}
	if pt.Spec.AutomountServiceAccountToken == nil || *pt.Spec.AutomountServiceAccountToken {
		t.Error("the service account token is mounted: dbcanary never calls the API")
	}
	c := pt.Spec.Containers[0]
	if c.Name != "dbcanary" {
		t.Fatalf("first container %s", c.Name)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Errorf("capabilities %+v, want drop ALL", sc.Capabilities)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/-/healthy" || p.HTTPGet.Port.StrVal != "http-metrics" {
		t.Errorf("liveness probe %+v, want GET /-/healthy", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/-/ready" || p.HTTPGet.Port.StrVal != "http-metrics" {
		t.Errorf("readiness probe %+v, want GET /-/ready", p)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want a CPU request and a memory limit", c.Resources)
	}
	if e := envVar(c, "DBCANARY_INSTANCE_ID"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("DBCANARY_INSTANCE_ID %+v, want the pod name from the downward API", e)
	}
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func TestChartAllOptions(t *testing.T) {
	objs := mustTemplate(t, chartCopy(t), allOptions)
	want := []string{
		"ConfigMap/dbcanary", "PodDisruptionBudget/dbcanary", "PrometheusRule/dbcanary",
		"Service/dbcanary", "Service/dbcanary-headless", "ServiceAccount/canary",
		"ServiceMonitor/dbcanary", "StatefulSet/dbcanary",
	}
	if got := objs.keys(); !slices.Equal(got, want) {
		t.Fatalf("rendered %v, want %v", got, want)
	}
	ss := get[appsv1.StatefulSet](t, objs, "StatefulSet/dbcanary")
	if *ss.Spec.Replicas != 3 || ss.Spec.ServiceName != "dbcanary-headless" || ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("statefulset spec replicas=%d serviceName=%s policy=%s", *ss.Spec.Replicas, ss.Spec.ServiceName, ss.Spec.PodManagementPolicy)
	}
	checkPodHardening(t, ss.Spec.Template)
	pod := ss.Spec.Template.Spec
	c := pod.Containers[0]
	for _, a := range []string{"--shard.count=3", "--web.listen-address=:19191", "--web.config.file=/etc/dbcanary/web/web.yml", "--log.level=debug", "--log.format=json", "--shutdown.grace-period=20s"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %q lack %s", c.Args, a)
		}
	}
	if e := envVar(c, "DBCANARY_SHARD_INDEX"); e == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("DBCANARY_SHARD_INDEX %+v, want the pod-index label", e)
	}
	if c.Image != "registry.example.com/dbcanary:v1.2.3" || c.Ports[0].ContainerPort != 19191 {
		t.Errorf("image %s port %d", c.Image, c.Ports[0].ContainerPort)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.Name != "scratch" && m.Name != "state" && !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Name)
		}
	}
	wantMounts := map[string]string{"config": "/etc/dbcanary", "secret-dbcanary-rabbitmq": "/etc/dbcanary/secrets/dbcanary-rabbitmq",
		"secret-dbcanary-s3": "/etc/dbcanary/secrets/dbcanary-s3", "web-config": "/etc/dbcanary/web", "scratch": "/scratch",
		"state": "/var/lib/dbcanary"}
	if !reflect.DeepEqual(mounts, wantMounts) {
		t.Errorf("mounts %v, want %v", mounts, wantMounts)
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440) {
			t.Errorf("secret volume %s mode %v, want 0440", v.Name, v.Secret.DefaultMode)
		}
	}
	if len(pod.Containers) != 2 || pod.Containers[1].Name != "reloader" {
		t.Errorf("containers %d, want dbcanary and reloader", len(pod.Containers))
	}
	if pod.NodeSelector["kubernetes.io/os"] != "linux" || pod.PriorityClassName != "monitoring" || len(pod.Tolerations) != 1 ||
		pod.Affinity == nil || len(pod.TopologySpreadConstraints) != 1 || pod.ServiceAccountName != "canary" {
		t.Errorf("scheduling fields not rendered: %+v", pod)
	}
	if ss.Spec.Template.Labels["tier"] != "monitoring" || ss.Spec.Template.Annotations["team"] != "storage" {
		t.Errorf("pod labels %v annotations %v", ss.Spec.Template.Labels, ss.Spec.Template.Annotations)
	}

	headless := get[corev1.Service](t, objs, "Service/dbcanary-headless")
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless service clusterIP %q", headless.Spec.ClusterIP)
	}
	sm := get[monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor/dbcanary")
	if ep := sm.Spec.Endpoints[0]; ep.Port != "http-metrics" || ep.Path != "/metrics" || ep.Interval != "15s" || ep.Scheme == nil || *ep.Scheme != "https" || len(ep.RelabelConfigs) != 1 {
		t.Errorf("servicemonitor endpoint %+v", ep)
	}
	if svcs := scrapedServices(t, objs, sm); len(svcs) != 1 || svcs[0].Name != "dbcanary" {
		t.Errorf("the ServiceMonitor scrapes through %v, want Service dbcanary alone", serviceNames(svcs))
	}
	if sm.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("servicemonitor labels %v", sm.Labels)
	}
	pdb := get[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/dbcanary")
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("pdb %+v, want minAvailable 2 only", pdb.Spec)
	}

	// The PrometheusRule holds exactly the groups of the rule file (the default job is the shipped one).
	pr := get[PrometheusRule](t, objs, "PrometheusRule/dbcanary")
	if d := groupsDiff(pr.Spec.Groups, ruleGroups(t, chartRulesFile(t))); d != "" {
		t.Errorf("PrometheusRule differs from the rule file: %s", d)
	}

	cm := get[corev1.ConfigMap](t, objs, "ConfigMap/dbcanary")
	checkConfig(t, cm)
}

func TestChartVantageMode(t *testing.T) {
	objs := mustTemplate(t, chartCopy(t), `
mode: vantage
vantages:
  - name: eu-west-1a
  - name: eu-west-1b
    nodeSelector: {topology.kubernetes.io/zone: eu-west-1b, pool: canary}
podDisruptionBudget: {enabled: true}
`)
	want := []string{"ConfigMap/dbcanary", "Deployment/dbcanary-eu-west-1a", "Deployment/dbcanary-eu-west-1b",
		"Pod/dbcanary-test", "PodDisruptionBudget/dbcanary", "Service/dbcanary", "ServiceAccount/dbcanary"}
	if got := objs.keys(); !slices.Equal(got, want) {
		t.Fatalf("rendered %v, want %v", got, want)
	}
	wantSel := map[string]map[string]string{
		"eu-west-1a": {"topology.kubernetes.io/zone": "eu-west-1a"},
		"eu-west-1b": {"topology.kubernetes.io/zone": "eu-west-1b", "pool": "canary"},
	}
	svc := get[corev1.Service](t, objs, "Service/dbcanary")
	for zone, sel := range wantSel {
		d := get[appsv1.Deployment](t, objs, "Deployment/dbcanary-"+zone)
		checkPodHardening(t, d.Spec.Template)
		c := d.Spec.Template.Spec.Containers[0]
		if e := envVar(c, "DBCANARY_VANTAGE"); e == nil || e.Value != zone {
			t.Errorf("%s: DBCANARY_VANTAGE %+v", zone, e)
		}
		if !reflect.DeepEqual(d.Spec.Template.Spec.NodeSelector, sel) {
			t.Errorf("%s: nodeSelector %v, want %v", zone, d.Spec.Template.Spec.NodeSelector, sel)
		}
		if d.Spec.Selector.MatchLabels["dbcanary.io/vantage"] != zone {
			t.Errorf("%s: selector %v overlaps the other vantages", zone, d.Spec.Selector.MatchLabels)
		}
		for k, v := range svc.Spec.Selector {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s: the service does not select its pods (%s=%s)", zone, k, v)
			}
		}
	}
	pdb := get[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/dbcanary")
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("pdb %+v, want maxUnavailable 1", pdb.Spec)
	}
}

// TestChartConfigChecksum: the checksum follows the config and only the config.
func TestChartConfigChecksum(t *testing.T) {
	chart := chartCopy(t)
	sum := func(values ...string) string {
		d := get[appsv1.Deployment](t, mustTemplate(t, chart, values...), "Deployment/dbcanary")
		return d.Spec.Template.Annotations["checksum/config"]
	}
	base := sum()
	if other := sum("replicas: 2\nlogLevel: debug\n"); other != base {
		t.Errorf("checksum changed with non-config values: %s -> %s", base, other)
	}
	if changed := sum("config: {targets: [{name: other, backend: noop}]}\n"); changed == base {
		t.Error("checksum did not change with the config")
	}
	d := get[appsv1.Deployment](t, mustTemplate(t, chart, "rollOnConfigChange: false\n"), "Deployment/dbcanary")
	if _, ok := d.Spec.Template.Annotations["checksum/config"]; ok {
		t.Error("rollOnConfigChange: false still sets checksum/config")
	}
}

func TestChartRejects(t *testing.T) {
	chart := chartCopy(t)
	noRules := chartCopy(t)
	if err := os.Remove(filepath.Join(noRules, "files", "dbcanary-rules.yml")); err != nil {
		t.Fatal(err)
	}
	noBoards := chartCopy(t)
	if err := os.RemoveAll(filepath.Join(noBoards, "files", "dashboards")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, values, want string
	}{
		{"unknown key", "replica: 2\n", "additional properties 'replica' not allowed"},
		{"unknown mode", "mode: daemonset\n", "mode"},
		{"vantage without vantages", "mode: vantage\n", "mode: vantage needs at least one entry in vantages"},
		{"bad vantage name", "mode: vantage\nvantages: [{name: EU_West}]\n", "vantages"},
		{"no targets", "config: {targets: []}\n", "minItems"},
		{"rules file absent", "prometheusRule: {enabled: true}\n", "files/dbcanary-rules.yml is missing from the chart; run `make chart-rules`"},
		{"job not a label value", "job: 'dbcanary\"}'\n", "job"},
		{"alertmanagerConfig without a pager", "alertmanagerConfig: {enabled: true}\n", "set alertmanagerConfig.receivers.pager"},
		{"receiver with a name", "alertmanagerConfig: {receivers: {pager: {name: x}}}\n", "receivers"},
		{"unknown alertmanagerConfig key", "alertmanagerConfig: {groupBy: [alertname]}\n", "additional properties 'groupBy' not allowed"},
		{"disabled alert unknown", "prometheusRule: {enabled: true, disabled: [DbcanaryLatencyAboveBaselin]}\n", `prometheusRule.disabled: no alert named "DbcanaryLatencyAboveBaselin" in files/dbcanary-rules.yml`},
		{"extra label the alerts set", "prometheusRule: {enabled: true, additionalRuleLabels: {severity: info}}\n", "prometheusRule.additionalRuleLabels.severity: alert"},
		{"extra namespace label with alertmanagerConfig", "prometheusRule: {enabled: true, additionalRuleLabels: {namespace: x}}\nalertmanagerConfig: {enabled: true, receivers: {pager: {webhookConfigs: [{url: \"https://x.invalid\"}]}}}\n",
			"prometheusRule.additionalRuleLabels.namespace: alertmanagerConfig.enabled sets the namespace label"},
		{"extra label not a label name", "prometheusRule: {additionalRuleLabels: {team-name: storage}}\n", "'team-name' does not match pattern"},
		{"boards absent", "dashboards: {enabled: true}\n", "files/dashboards/*.json is missing from the chart; run `make chart-boards`"},
		{"unknown networkPolicy key", "networkPolicy: {ingress: []}\n", "additional properties 'ingress' not allowed"},
		{"dashboard label value not a label value", "dashboards: {labelValue: 'yes please'}\n", "labelValue"},
		{"deployment on a claim with 2 replicas", "replicas: 2\nstateDir: {existingClaim: dbcanary-state}\n",
			"mode deployment with stateDir.existingClaim runs one pod (replicas: 1, got 2)"},
		{"helm test url not http", "helmTest: {url: dbcanary:19190}\n", "/helmTest/url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chart
			switch tc.name {
			case "rules file absent":
				c = noRules
			case "boards absent":
				c = noBoards
			}
			_, err := template(t, c, tc.values)
			if err == nil {
				t.Fatal("rendered; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not mention %q:\n%v", tc.want, err)
			}
		})
	}
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// TestMain removes the binary dbcanary() built, which outlives any one test.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// dbcanary builds the binary with `make build` into a temp dir (BIN= keeps
// the shared checkout's bin/ untouched).
func dbcanary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		var err error
		if binDir, err = os.MkdirTemp("", "dbcanary-deploy-test-"); err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(binDir, "dbcanary")
		cmd := exec.Command("make", "--no-print-directory", "build", "BIN="+binPath)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("make build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var secretPathRE = regexp.MustCompile(`/etc/dbcanary/secrets/[A-Za-z0-9._/-]+`)

// checkConfig runs dbcanary check-config on a rendered config, with the
// secret files it names created under a temp dir (they are mounts in a pod).
func checkConfig(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	cfg, ok := cm.Data["dbcanary.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no dbcanary.yaml", cm.Name)
	}
	dir := t.TempDir()
	cfg = secretPathRE.ReplaceAllStringFunc(cfg, func(p string) string {
		local := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, []byte("not-a-real-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return local
	})
	file := filepath.Join(dir, "dbcanary.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dbcanary(t), "check-config", "--config.file", file)
	cmd.Env = append(os.Environ(), "DBCANARY_INSTANCE_ID=dbcanary-0")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": OK: ") {
		t.Errorf("check-config of ConfigMap %s: %v\n%s\n%s", cm.Name, err, out, cfg)
	}
}

// kustomize renders a kustomization with the kustomize library kubectl
// embeds (sigs.k8s.io/kustomize/api), so no kubectl binary is needed.
func kustomize(t *testing.T, dir string) objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return decodeStrict(t, out)
}

// TestKustomizeBaseMatchesChartDefaults: the plain manifests are the chart's
// default render, minus Helm's own labels and with kustomize's hashed
// ConfigMap name in place of the checksum annotation.
func TestKustomizeBaseMatchesChartDefaults(t *testing.T) {
	base := kustomize(t, filepath.Join(repoRoot, "deploy", "kubernetes", "base"))
	chart := mustTemplate(t, chartCopy(t))

	kd := onlyKind[appsv1.Deployment](t, base, "Deployment")
	hd := get[appsv1.Deployment](t, chart, "Deployment/dbcanary")
	checkPodHardening(t, kd.Spec.Template)
	kcm := onlyKind[corev1.ConfigMap](t, base, "ConfigMap")
	if kv := kd.Spec.Template.Spec.Volumes[0]; kv.ConfigMap == nil || kv.ConfigMap.Name != kcm.Name {
		t.Errorf("base deployment mounts %+v, not the generated ConfigMap %s", kv, kcm.Name)
	}
	kpod, hpod := kd.Spec.Template.Spec.DeepCopy(), hd.Spec.Template.Spec.DeepCopy()
	kpod.Volumes[0].ConfigMap.Name = hpod.Volumes[0].ConfigMap.Name
	if !reflect.DeepEqual(kpod, hpod) {
		kb, _ := yaml.Marshal(kpod)
		hb, _ := yaml.Marshal(hpod)
		t.Errorf("pod specs differ:\nbase:\n%s\nchart:\n%s", kb, hb)
	}
	if !reflect.DeepEqual(kd.Spec.Selector, hd.Spec.Selector) || *kd.Spec.Replicas != *hd.Spec.Replicas ||
		!reflect.DeepEqual(kd.Spec.Template.Labels, hd.Spec.Template.Labels) {
		t.Errorf("deployment selector/replicas/labels differ: %+v / %+v", kd.Spec.Selector, hd.Spec.Selector)
	}

	ks, hs := onlyKind[corev1.Service](t, base, "Service"), get[corev1.Service](t, chart, "Service/dbcanary")
	if !reflect.DeepEqual(ks.Spec, hs.Spec) {
		t.Errorf("service specs differ: %+v / %+v", ks.Spec, hs.Spec)
	}
	// The labels a ServiceMonitor selects and takes the job from.
	for _, k := range []string{"dbcanary.io/service", "dbcanary.io/job"} {
		if ks.Labels[k] == "" || ks.Labels[k] != hs.Labels[k] {
			t.Errorf("Service label %s: base %q, chart %q", k, ks.Labels[k], hs.Labels[k])
		}
	}
	ksa, hsa := onlyKind[corev1.ServiceAccount](t, base, "ServiceAccount"), get[corev1.ServiceAccount](t, chart, "ServiceAccount/dbcanary")
	if ksa.Name != hsa.Name || !reflect.DeepEqual(ksa.AutomountServiceAccountToken, hsa.AutomountServiceAccountToken) {
		t.Errorf("service accounts differ: %+v / %+v", ksa, hsa)
	}

	// Same config, whatever the comments and key order.
	var kc, hc any
	hcm := get[corev1.ConfigMap](t, chart, "ConfigMap/dbcanary")
	if err := yaml.Unmarshal([]byte(kcm.Data["dbcanary.yaml"]), &kc); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(hcm.Data["dbcanary.yaml"]), &hc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(kc, hc) {
		t.Errorf("configs differ:\nbase: %v\nchart: %v", kc, hc)
	}
	checkConfig(t, kcm)
}

func TestKustomizeSidecar(t *testing.T) {
	objs := kustomize(t, filepath.Join(repoRoot, "deploy", "kubernetes", "sidecar"))
	d := onlyKind[appsv1.Deployment](t, objs, "Deployment")
	pod := d.Spec.Template.Spec
	var canary *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "dbcanary" {
			canary = &pod.Containers[i]
		}
	}
	if len(pod.Containers) != 2 || canary == nil {
		t.Fatalf("want the application and a dbcanary container, have %d containers", len(pod.Containers))
	}
	if e := envVar(*canary, "DBCANARY_INSTANCE_ID"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("DBCANARY_INSTANCE_ID %+v, want the pod name", e)
	}
	if sc := canary.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
		t.Errorf("dbcanary container securityContext %+v", sc)
	}
	if ps := pod.SecurityContext; ps == nil || !*ps.RunAsNonRoot {
		t.Errorf("pod securityContext %+v, want runAsNonRoot", ps)
	}
	cm := onlyKind[corev1.ConfigMap](t, objs, "ConfigMap")
	if v := pod.Volumes[0]; v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
		t.Errorf("config volume %+v does not use the generated ConfigMap %s", v, cm.Name)
	}
	checkConfig(t, cm)
	// The durability ledger's state_dir is a writable volume (the root filesystem is read-only).
	if !strings.Contains(cm.Data["dbcanary.yaml"], "state_dir: /var/lib/dbcanary") {
		t.Error("the sidecar config sets no global.state_dir: its ledger would live in memory")
	}
	mounted := false
	for _, m := range canary.VolumeMounts {
		if m.MountPath == "/var/lib/dbcanary" && !m.ReadOnly {
			for _, v := range pod.Volumes {
				mounted = mounted || v.Name == m.Name && v.EmptyDir != nil
			}
		}
	}
	if !mounted {
		t.Error("no writable volume at /var/lib/dbcanary for the durability ledger")
	}
}

func TestBinaryIsStatic(t *testing.T) {
	bin := dbcanary(t)
	out, _ := exec.Command("ldd", bin).CombinedOutput()
	if !strings.Contains(string(out), "not a dynamic executable") {
		t.Errorf("ldd %s: %s; want \"not a dynamic executable\"", bin, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dbcanary, version") {
		t.Errorf("dbcanary version: %v %s", err, out)
	}
}

// TestDockerfile checks what can be checked without a Docker daemon: the
// image builds with the Makefile's flags on an empty non-root base, whose
// layout test/deploy/image_layout_test.go compares with the Containerfile podman builds.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{
		"FROM golang:1.26",
		"make build VERSION=\"$VERSION\" REVISION=\"$REVISION\"",
		"FROM scratch",
		"COPY --from=build /src/bin/dbcanary /usr/local/bin/dbcanary",
		"USER 65532:65532",
		`ENTRYPOINT ["/usr/local/bin/dbcanary"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, needed := range []string{"go.mod", "go.sum", "Makefile", "cmd", "internal", "probes"} {
		for _, line := range strings.Split(string(ignore), "\n") {
			if strings.TrimSpace(line) == needed {
				t.Errorf(".dockerignore excludes %s, which the build needs", needed)
			}
		}
	}
}

func TestSystemdUnit(t *testing.T) {
	unit := filepath.Join(repoRoot, "deploy", "systemd", "dbcanary.service")
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecReload=/bin/kill -HUP $MAINPID", "DynamicUser=yes", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n",
		"ProtectSystem=strict", "PrivateTmp=yes", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
		"SystemCallFilter=@system-service", "--config.file=/etc/dbcanary/dbcanary.yaml", "LoadCredential=",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: unit text checked, not verified")
	}
	// verify insists that ExecStart's binary exists: point it at the one make builds.
	dir := t.TempDir()
	local := filepath.Join(dir, "dbcanary.service")
	if err := os.WriteFile(local, bytes.ReplaceAll(b, []byte("/usr/local/bin/dbcanary"), []byte(dbcanary(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", local).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
