package deploy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestChartHelmTest: `helm test`'s hook is a Pod of the dbcanary image that
// runs check-endpoint against the release's Service by the address Kubernetes
// puts in every pod's environment, hardened as the workload is, and selected by
// none of the release's selectors; its arguments, with that address filled in,
// pass against a healthy endpoint when the real binary runs them.
func TestChartHelmTest(t *testing.T) {
	chart := chartCopy(t)
	out, err := templateRelease(t, "payments-canary", chart, "podDisruptionBudget: {enabled: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeStrict(t, out)
	hook := get[corev1.Pod](t, objs, "Pod/payments-canary-dbcanary-test")
	if hook.Annotations["helm.sh/hook"] != "test" || hook.Annotations["helm.sh/hook-delete-policy"] != "before-hook-creation" {
		t.Errorf("annotations %v, want a test hook kept for its log (helm test --logs) and replaced at the next run", hook.Annotations)
	}
	spec := hook.Spec
	if spec.RestartPolicy != corev1.RestartPolicyNever || spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken ||
		spec.EnableServiceLinks == nil || !*spec.EnableServiceLinks {
		t.Errorf("restartPolicy %s automount %v enableServiceLinks %v, want Never, false, true", spec.RestartPolicy, spec.AutomountServiceAccountToken, spec.EnableServiceLinks)
	}
	d := get[appsv1.Deployment](t, objs, "Deployment/payments-canary-dbcanary")
	c := spec.Containers[0]
	if c.Image != d.Spec.Template.Spec.Containers[0].Image || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("image %s (workload %s), memory limit %v", c.Image, d.Spec.Template.Spec.Containers[0].Image, c.Resources.Limits.Memory())
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
		*sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v, want the workload's hardening", sc)
	}
	if ps := spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("pod securityContext %+v, want runAsNonRoot", ps)
	}
	// The Service's address variables: its name upper-cased, '-' as '_', and its port's name.
	svc := get[corev1.Service](t, objs, "Service/payments-canary-dbcanary")
	wantArgs := []string{"check-endpoint", "--url=http://$(PAYMENTS_CANARY_DBCANARY_SERVICE_HOST):$(PAYMENTS_CANARY_DBCANARY_SERVICE_PORT_HTTP_METRICS)", "--timeout=10s"}
	if !slices.Equal(c.Args, wantArgs) || svc.Spec.Ports[0].Name != "http-metrics" {
		t.Errorf("args %q, want %q (Service port %q)", c.Args, wantArgs, svc.Spec.Ports[0].Name)
	}
	// Nothing of the release selects it: not the Service, the PDB or the workload.
	pdb := get[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/payments-canary-dbcanary")
	for what, sel := range map[string]*metav1.LabelSelector{"Service": {MatchLabels: svc.Spec.Selector}, "PodDisruptionBudget": pdb.Spec.Selector, "Deployment": d.Spec.Selector} {
		if s, err := metav1.LabelSelectorAsSelector(sel); err != nil || s.Matches(labels.Set(hook.Labels)) {
			t.Errorf("the %s's selector %v selects the helm test Pod %v (%v)", what, sel, hook.Labels, err)
		}
	}
	runHookArgs(t, c.Args)

	for _, tc := range []struct{ name, values, wantURL string }{
		{"disabled", "helmTest: {enabled: false}\n", ""},
		{"web config: no credentials", "webConfig: {existingSecret: dbcanary-web}\n", ""},
		{"web config with a url", "webConfig: {existingSecret: dbcanary-web}\nhelmTest: {url: \"https://dbcanary.monitoring.svc:19190\"}\n", "--url=https://dbcanary.monitoring.svc:19190"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustTemplate(t, chart, tc.values)
			p, ok := objs["Pod/dbcanary-test"].(*corev1.Pod)
			if tc.wantURL == "" && ok {
				t.Errorf("helm test Pod rendered: %q", p.Spec.Containers[0].Args)
			}
			if tc.wantURL != "" && (!ok || !slices.Contains(p.Spec.Containers[0].Args, tc.wantURL)) {
				t.Errorf("want a helm test Pod with %s; got %v", tc.wantURL, p)
			}
		})
	}
}

// runHookArgs runs the built dbcanary with the hook's arguments, the
// Service's address variables expanded as the kubelet does, against a healthy
// stand-in endpoint: exit 0.
func runHookArgs(t *testing.T, args []string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Ready") })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "dbcanary_build_info{version=\"x\"} 1\ndbcanary_config_last_reload_successful 1\ndbcanary_targets 1\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	var expanded []string
	for _, a := range args {
		a = strings.ReplaceAll(a, "$(PAYMENTS_CANARY_DBCANARY_SERVICE_HOST)", host)
		expanded = append(expanded, strings.ReplaceAll(a, "$(PAYMENTS_CANARY_DBCANARY_SERVICE_PORT_HTTP_METRICS)", port))
	}
	out, err := exec.Command(dbcanary(t), expanded...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), srv.URL+": OK") {
		t.Errorf("dbcanary %q: %v\n%s", expanded, err, out)
	}
}
