package deploy

import (
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestChartStateDir: the durability ledger's state directory is a volume the
// config points at, an emptyDir by default, a claim when given (mode
// deployment then renders a one-pod StatefulSet: TestChartDeploymentOnAClaim),
// and absent when disabled; a state_dir set in the config wins.
func TestChartStateDir(t *testing.T) {
	cases := []struct {
		name, values, wantDir, wantClaim string
		emptyDir                         bool
	}{
		{"default", ``, "/var/lib/dbcanary", "", true},
		{"claim", "stateDir: {existingClaim: dbcanary-state}", "/var/lib/dbcanary", "dbcanary-state", false},
		{"own state_dir", "stateDir: {path: /state}\nconfig: {global: {state_dir: /state/x}, targets: [{name: own, backend: noop}]}", "/state/x", "", true},
		{"disabled", "stateDir: {enabled: false}", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs objects
			if tc.values == "" {
				objs = mustTemplate(t, chartCopy(t))
			} else {
				objs = mustTemplate(t, chartCopy(t), tc.values)
			}
			cm := get[corev1.ConfigMap](t, objs, "ConfigMap/dbcanary")
			checkConfig(t, cm)
			cfg := cm.Data["dbcanary.yaml"]
			if tc.wantDir == "" && strings.Contains(cfg, "state_dir") || tc.wantDir != "" && !strings.Contains(cfg, "state_dir: "+tc.wantDir+"\n") {
				t.Errorf("config %q: want state_dir %q", cfg, tc.wantDir)
			}
			var pod corev1.PodSpec
			if tc.wantClaim != "" {
				pod = get[appsv1.StatefulSet](t, objs, "StatefulSet/dbcanary").Spec.Template.Spec
			} else {
				pod = get[appsv1.Deployment](t, objs, "Deployment/dbcanary").Spec.Template.Spec
			}
			var vol *corev1.Volume
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == "state" {
					vol = &pod.Volumes[i]
				}
			}
			mounted := false
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.Name == "state" {
					mounted = true
				}
			}
			switch {
			case tc.wantDir == "":
				if vol != nil || mounted {
					t.Errorf("disabled, yet volume %+v mounted %v", vol, mounted)
				}
			case vol == nil || !mounted:
				t.Fatalf("no state volume (%+v) or mount (%v)", vol, mounted)
			case tc.emptyDir && vol.EmptyDir == nil, tc.wantClaim != "" && (vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != tc.wantClaim):
				t.Errorf("state volume %+v, want emptyDir %v claim %q", vol.VolumeSource, tc.emptyDir, tc.wantClaim)
			}
		})
	}
}

// TestChartDeploymentOnAClaim: mode deployment with its state on a claim is a
// one-pod StatefulSet (the new pod is started, with the old one's name and so
// its instance id and ledger file, only once the old one has stopped), with no
// sharding; the Service and the monitors select it as they select a
// Deployment's pod. test/k8s's TestLedgerSurvivesPodDeletion runs it on a cluster.
func TestChartDeploymentOnAClaim(t *testing.T) {
	objs := mustTemplate(t, chartCopy(t), "stateDir: {existingClaim: dbcanary-state}\nserviceMonitor: {enabled: true}\n")
	if _, ok := objs["Deployment/dbcanary"]; ok {
		t.Error("a Deployment rendered beside the StatefulSet")
	}
	if _, ok := objs["Service/dbcanary-headless"]; ok {
		t.Error("the sharded mode's headless Service rendered in mode deployment")
	}
	ss := get[appsv1.StatefulSet](t, objs, "StatefulSet/dbcanary")
	if *ss.Spec.Replicas != 1 || ss.Spec.ServiceName != "dbcanary" {
		t.Errorf("replicas %d serviceName %q, want 1 and the release's Service", *ss.Spec.Replicas, ss.Spec.ServiceName)
	}
	checkPodHardening(t, ss.Spec.Template)
	c := ss.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--shard.") {
			t.Errorf("args %q shard a one-pod deployment", c.Args)
		}
	}
	if e := envVar(c, "DBCANARY_SHARD_INDEX"); e != nil {
		t.Errorf("DBCANARY_SHARD_INDEX %+v set in mode deployment", e)
	}
	if e := envVar(c, "DBCANARY_INSTANCE_ID"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("DBCANARY_INSTANCE_ID %+v, want the pod name (stable in a StatefulSet)", e)
	}
	svc := get[corev1.Service](t, objs, "Service/dbcanary")
	for k, v := range svc.Spec.Selector {
		if ss.Spec.Template.Labels[k] != v {
			t.Errorf("the Service does not select the pod (%s=%s)", k, v)
		}
	}
	sm := get[monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor/dbcanary")
	if svcs := scrapedServices(t, objs, sm); len(svcs) != 1 || svcs[0].Name != "dbcanary" {
		t.Errorf("the ServiceMonitor scrapes through %v, want Service dbcanary alone", serviceNames(svcs))
	}
}
