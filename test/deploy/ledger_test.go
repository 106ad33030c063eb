package deploy

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestChartStateDir: the durability ledger's state directory is a volume the
// config points at, an emptyDir by default, a claim when given, and absent
// when disabled; a state_dir set in the config wins.
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
			pod := get[appsv1.Deployment](t, objs, "Deployment/dbcanary").Spec.Template.Spec
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
