package deploy

// The chart as a package users install: lint, package, README, the Grafana
// boards, the NetworkPolicy, and the PrometheusRule's per-alert switches.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/dbcanary/dbcanary/test/stack"
)

// everythingOn turns every optional object of the chart on.
const everythingOn = `
serviceMonitor: {enabled: true}
prometheusRule: {enabled: true, disabled: [DbcanaryLatencyAboveBaseline], additionalRuleLabels: {team: storage}}
alertmanagerConfig: {enabled: true, receivers: {pager: {webhookConfigs: [{url: "https://pager.example.invalid/dbcanary"}]}}}
podDisruptionBudget: {enabled: true}
dashboards: {enabled: true}
networkPolicy: {enabled: true, egress: {enabled: true, to: [{ports: [{port: 5671}]}]}}
`

// boardFiles are the Grafana boards of dashboards/, by file name.
func boardFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	boards := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		boards[filepath.Base(p)] = b
	}
	return boards
}

// TestChartBoardsUpToDate: the chart carries the boards of dashboards/, byte for byte, and no other.
func TestChartBoardsUpToDate(t *testing.T) {
	want := boardFiles(t, filepath.Join(repoRoot, "dashboards"))
	if len(want) == 0 {
		t.Fatal("no board in dashboards/")
	}
	got := boardFiles(t, filepath.Join(chartDir, "files", "dashboards"))
	for name, b := range want {
		if g, ok := got[name]; !ok || !bytes.Equal(g, b) {
			t.Errorf("deploy/helm/dbcanary/files/dashboards/%s is missing or differs from dashboards/%s: run `make chart-boards` (or `make generate`) and commit it", name, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("deploy/helm/dbcanary/files/dashboards/%s is not in dashboards/: run `make chart-boards`", name)
		}
	}
}

// TestChartDashboards: off by default; on, one ConfigMap per board with the
// board's JSON and the Grafana sidecar's label, both configurable.
func TestChartDashboards(t *testing.T) {
	chart := chartCopy(t)
	for _, k := range mustTemplate(t, chart).keys() {
		if strings.HasPrefix(k, "ConfigMap/") && k != "ConfigMap/dbcanary" {
			t.Errorf("%s rendered while dashboards.enabled is false", k)
		}
	}
	boards := boardFiles(t, filepath.Join(chartDir, "files", "dashboards"))
	for _, tc := range []struct {
		name, values, release, label, value, namespace string
		annotations                                    map[string]string
	}{
		{"sidecar defaults", "dashboards: {enabled: true}\n", "dbcanary", "grafana_dashboard", "1", "monitoring", nil},
		{"own label", "dashboards: {enabled: true, label: dashboards.example.com/load, labelValue: grafana-main, namespace: grafana, annotations: {grafana_folder: Storage}, labels: {team: storage}}\n",
			"payments", "dashboards.example.com/load", "grafana-main", "grafana", map[string]string{"grafana_folder": "Storage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := templateRelease(t, tc.release, chart, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeStrict(t, out)
			seen := map[string]bool{}
			for _, k := range objs.keys() {
				cm, ok := objs[k].(*corev1.ConfigMap)
				if !ok || cm.Labels[tc.label] == "" {
					continue
				}
				if cm.Labels[tc.label] != tc.value || cm.Namespace != tc.namespace {
					t.Errorf("%s: label %s=%q namespace %q, want %q in %q", k, tc.label, cm.Labels[tc.label], cm.Namespace, tc.value, tc.namespace)
				}
				if !strings.HasPrefix(cm.Name, tc.release+"-") {
					t.Errorf("%s is not named after the release %s", k, tc.release)
				}
				if tc.annotations != nil && !maps.Equal(cm.Annotations, tc.annotations) {
					t.Errorf("%s annotations %v, want %v", k, cm.Annotations, tc.annotations)
				}
				if tc.name == "own label" && cm.Labels["team"] != "storage" {
					t.Errorf("%s labels %v lack team=storage", k, cm.Labels)
				}
				if len(cm.Data) != 1 {
					t.Fatalf("%s holds %d keys, want one board", k, len(cm.Data))
				}
				for file, data := range cm.Data {
					want, ok := boards[file]
					if !ok {
						t.Fatalf("%s holds %s, which is no board", k, file)
					}
					if seen[file] {
						t.Errorf("board %s rendered twice", file)
					}
					seen[file] = true
					// The chart strips the file's final newline; the JSON is the board's.
					if data != strings.TrimSuffix(string(want), "\n") {
						t.Errorf("%s: board %s differs from files/dashboards/%s", k, file, file)
					}
					var board struct {
						UID   string `json:"uid"`
						Title string `json:"title"`
					}
					if err := json.Unmarshal([]byte(data), &board); err != nil || board.UID == "" || board.Title == "" {
						t.Errorf("%s: board %s is not a Grafana board with uid and title: %v", k, file, err)
					}
				}
			}
			if len(seen) != len(boards) {
				t.Errorf("rendered boards %v, want every one of files/dashboards (%d)", slices.Sorted(maps.Keys(seen)), len(boards))
			}
		})
	}
}

// TestChartNetworkPolicy: ingress to the metrics port only, from the given
// peers; egress open unless enabled, then DNS and the given rules only.
func TestChartNetworkPolicy(t *testing.T) {
	chart := chartCopy(t)
	if _, ok := mustTemplate(t, chart)["NetworkPolicy/dbcanary"]; ok {
		t.Error("NetworkPolicy rendered while networkPolicy.enabled is false")
	}
	metricsPort := intstr.FromString("http-metrics")
	tcp := corev1.ProtocolTCP

	objs := mustTemplate(t, chart, `
mode: vantage
vantages: [{name: eu-west-1a}]
networkPolicy:
  enabled: true
  ingressFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
      podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}
`)
	np := get[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/dbcanary")
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() {
		t.Fatalf("podSelector %+v: %v (empty selects every pod of the namespace)", np.Spec.PodSelector, err)
	}
	d := get[appsv1.Deployment](t, objs, "Deployment/dbcanary-eu-west-1a")
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("podSelector %v does not select the pods %v", np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || np.Spec.Egress != nil {
		t.Errorf("policyTypes %v egress %+v, want Ingress only", np.Spec.PolicyTypes, np.Spec.Egress)
	}
	if len(np.Spec.Ingress) != 1 {
		t.Fatalf("ingress %+v, want one rule", np.Spec.Ingress)
	}
	in := np.Spec.Ingress[0]
	if len(in.Ports) != 1 || *in.Ports[0].Port != metricsPort || *in.Ports[0].Protocol != tcp {
		t.Errorf("ingress ports %+v, want TCP http-metrics only", in.Ports)
	}
	if len(in.From) != 2 || in.From[0].NamespaceSelector == nil || in.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" ||
		in.From[0].PodSelector == nil || in.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
		t.Errorf("ingress from %+v, want the Prometheus pods of namespace monitoring, then the helm test Pod", in.From)
	}
	// The helm test Pod may reach the port (the second peer selects it), and is not one of the pods.
	hook := get[corev1.Pod](t, objs, "Pod/dbcanary-test")
	if peer, err := metav1.LabelSelectorAsSelector(in.From[1].PodSelector); err != nil || in.From[1].NamespaceSelector != nil ||
		!peer.Matches(labels.Set(hook.Labels)) || peer.Matches(labels.Set(d.Spec.Template.Labels)) || sel.Matches(labels.Set(hook.Labels)) {
		t.Errorf("ingress peer %+v (%v) does not select the helm test Pod %v alone", in.From[1], err, hook.Labels)
	}
	// The named port exists on the dbcanary container.
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == metricsPort.StrVal }) {
		t.Errorf("container ports %+v lack %s", c.Ports, metricsPort.StrVal)
	}

	// Egress: DNS plus the stores, or the stores alone.
	for _, tc := range []struct {
		name, values string
		rules        int
		dns          bool
	}{
		{"dns and stores", "networkPolicy: {enabled: true, egress: {enabled: true, to: [{to: [{ipBlock: {cidr: 10.0.0.0/8}}], ports: [{port: 5671}]}]}}\n", 2, true},
		{"stores only", "networkPolicy: {enabled: true, egress: {enabled: true, dns: false, to: [{ports: [{port: 9042}]}]}}\n", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := get[networkingv1.NetworkPolicy](t, mustTemplate(t, chart, tc.values), "NetworkPolicy/dbcanary")
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
				t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
			}
			if len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].From != nil {
				t.Errorf("ingress %+v, want the metrics port from anywhere", np.Spec.Ingress)
			}
			if len(np.Spec.Egress) != tc.rules {
				t.Fatalf("egress %+v, want %d rules", np.Spec.Egress, tc.rules)
			}
			dns := np.Spec.Egress[0]
			isDNS := len(dns.To) == 0 && len(dns.Ports) == 2 && dns.Ports[0].Port.IntValue() == 53 && dns.Ports[1].Port.IntValue() == 53 &&
				*dns.Ports[0].Protocol == corev1.ProtocolUDP && *dns.Ports[1].Protocol == corev1.ProtocolTCP
			if isDNS != tc.dns {
				t.Errorf("first egress rule %+v: DNS %v, want %v", dns, isDNS, tc.dns)
			}
			last := np.Spec.Egress[len(np.Spec.Egress)-1]
			if p := last.Ports[0].Port.IntValue(); p != 5671 && p != 9042 {
				t.Errorf("last egress rule %+v is not the store's", last)
			}
		})
	}
}

// alertRules returns the alerting rules of groups by name (a name may repeat: warning and critical).
func alertRules(groups []RuleGroup) map[string][]map[string]string {
	alerts := map[string][]map[string]string{}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = append(alerts[r.Alert], r.Labels)
			}
		}
	}
	return alerts
}

// TestChartPrometheusRuleDisableAndLabels: disabled alerts are gone and only
// they; every other alert carries the extra labels on top of its own; the
// recording rules are untouched.
func TestChartPrometheusRuleDisableAndLabels(t *testing.T) {
	chart := chartCopy(t)
	shipped := ruleGroups(t, chartRulesFile(t))
	all := alertRules(shipped)
	disabled := []string{"DbcanaryLatencyAboveBaseline", "DbcanaryExporterDown"}
	for _, name := range disabled {
		if _, ok := all[name]; !ok {
			t.Fatalf("the rules define no %s: pick other alerts for this test", name)
		}
	}
	for _, am := range []bool{false, true} {
		values := "prometheusRule:\n  enabled: true\n  disabled: [" + strings.Join(disabled, ", ") + "]\n  additionalRuleLabels: {team: storage, routing_key: canary}\n"
		if am {
			values += "alertmanagerConfig: {enabled: true, receivers: {pager: {webhookConfigs: [{url: \"https://pager.example.invalid/x\"}]}}}\n"
		}
		t.Run("alertmanagerConfig="+map[bool]string{false: "off", true: "on"}[am], func(t *testing.T) {
			pr := get[PrometheusRule](t, mustTemplate(t, chart, values), "PrometheusRule/dbcanary")
			got := alertRules(pr.Spec.Groups)
			for name, rules := range all {
				if slices.Contains(disabled, name) {
					if _, ok := got[name]; ok {
						t.Errorf("disabled alert %s still rendered", name)
					}
					continue
				}
				if len(got[name]) != len(rules) {
					t.Errorf("alert %s: %d rules rendered, want %d", name, len(got[name]), len(rules))
					continue
				}
				for i, own := range rules {
					want := maps.Clone(own)
					if want == nil {
						want = map[string]string{}
					}
					want["team"], want["routing_key"] = "storage", "canary"
					if am {
						want["namespace"] = "monitoring"
					}
					if !maps.Equal(got[name][i], want) {
						t.Errorf("alert %s labels %v, want %v", name, got[name][i], want)
					}
				}
			}
			// Recording rules: all there, labels unchanged.
			var wantRec, gotRec []string
			for _, gs := range [][]RuleGroup{shipped, pr.Spec.Groups} {
				var recs []string
				for _, g := range gs {
					for _, r := range g.Rules {
						if r.Record != "" {
							b, _ := json.Marshal(r)
							recs = append(recs, string(b))
						}
					}
				}
				if wantRec == nil {
					wantRec = recs
				} else {
					gotRec = recs
				}
			}
			if !slices.Equal(gotRec, wantRec) {
				t.Errorf("recording rules changed: %d rendered, %d shipped", len(gotRec), len(wantRec))
			}
			// Groups keep their order and settings; none is left empty.
			for _, g := range pr.Spec.Groups {
				if len(g.Rules) == 0 {
					t.Errorf("group %s rendered empty", g.Name)
				}
			}
		})
	}

	// Every alert of a group disabled: the group goes too.
	var group RuleGroup
	for _, g := range shipped {
		if !slices.ContainsFunc(g.Rules, func(r Rule) bool { return r.Alert == "" }) {
			group = g
			break
		}
	}
	var names []string
	for _, r := range group.Rules {
		if !slices.Contains(names, r.Alert) {
			names = append(names, r.Alert)
		}
	}
	if len(names) == 0 {
		t.Fatal("no rule group holds alerts only")
	}
	var wantGroups []string
	for _, g := range shipped {
		if slices.ContainsFunc(g.Rules, func(r Rule) bool { return r.Alert == "" || !slices.Contains(names, r.Alert) }) {
			wantGroups = append(wantGroups, g.Name)
		}
	}
	b, _ := json.Marshal(names)
	pr := get[PrometheusRule](t, mustTemplate(t, chart, "prometheusRule: {enabled: true, disabled: "+string(b)+"}\n"), "PrometheusRule/dbcanary")
	var gotGroups []string
	for _, g := range pr.Spec.Groups {
		gotGroups = append(gotGroups, g.Name)
	}
	if !slices.Equal(gotGroups, wantGroups) {
		t.Errorf("with every alert of group %s disabled, groups %v rendered, want %v", group.Name, gotGroups, wantGroups)
	}
}

// TestChartLintAndPackage: `helm lint --strict` passes with the defaults and
// with every option on, and `helm package` makes an archive that carries the
// rules, the boards, the README and the schema, and renders.
func TestChartLintAndPackage(t *testing.T) {
	chart := chartCopy(t)
	on := filepath.Join(t.TempDir(), "on.yaml")
	if err := os.WriteFile(on, []byte(everythingOn), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lint", "--strict", chart},
		{"lint", "--strict", chart, "-f", on},
		{"lint", "--strict", chart, "-f", on, "--set", "mode=sharded,replicas=3"},
	} {
		out, err := exec.Command(helm(t), args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	dst := t.TempDir()
	out, err := exec.Command(helm(t), "package", chart, "-d", dst).CombinedOutput()
	if err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	pkgs, _ := filepath.Glob(filepath.Join(dst, "dbcanary-*.tgz"))
	if len(pkgs) != 1 {
		t.Fatalf("helm package made %v, want one dbcanary-<version>.tgz\n%s", pkgs, out)
	}
	pkg := pkgs[0]
	files := tgzFiles(t, pkg)
	want := []string{"dbcanary/Chart.yaml", "dbcanary/README.md", "dbcanary/values.yaml", "dbcanary/values.schema.json",
		"dbcanary/files/dbcanary-rules.yml", "dbcanary/templates/dashboards.yaml", "dbcanary/templates/networkpolicy.yaml"}
	for name := range boardFiles(t, filepath.Join(chartDir, "files", "dashboards")) {
		want = append(want, "dbcanary/files/dashboards/"+name)
	}
	for _, f := range want {
		if !slices.Contains(files, f) {
			t.Errorf("the package lacks %s; it holds %v", f, files)
		}
	}
	if slices.Contains(files, "dbcanary/README.md.gotmpl") {
		t.Error("the package carries README.md.gotmpl (.helmignore)")
	}
	// The package as a user installs it.
	objs := mustTemplate(t, pkg, everythingOn)
	for _, k := range []string{"NetworkPolicy/dbcanary", "PrometheusRule/dbcanary", "ConfigMap/dbcanary-overview"} {
		if _, ok := objs[k]; !ok {
			t.Errorf("the package does not render %s; it renders %v", k, objs.keys())
		}
	}
}

// tgzFiles lists the regular files of a gzipped tar archive.
func tgzFiles(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			names = append(names, h.Name)
		}
	}
}

// readmeRowRE is one row of the README's values table: key, type, default, description.
var readmeRowRE = regexp.MustCompile(`^\| (\S+) \| (\S+) \| (.*?) \| (.*) \|$`)

// TestChartReadme: README.md is what `make chart-docs` (helm-docs) makes of
// values.yaml now, and every value is documented there: its own row, or the
// row of the object it belongs to, with a description; no row names a key
// values.yaml lacks.
func TestChartReadme(t *testing.T) {
	committed, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatalf("%v: run `make chart-docs`", err)
	}
	helmDocs := stack.Installed(t, "helm", "docs-path")
	chart := chartCopy(t)
	if out, err := exec.Command(helmDocs, "--skip-version-footer", "--chart-search-root", chart).CombinedOutput(); err != nil || strings.Contains(string(out), "level=warning") || strings.Contains(string(out), "level=error") {
		t.Fatalf("helm-docs: %v\n%s", err, out)
	}
	generated, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(generated, committed) {
		t.Errorf("deploy/helm/dbcanary/README.md is not what helm-docs makes of values.yaml and README.md.gotmpl: run `make chart-docs` and commit it")
	}

	rows := map[string]string{}
	for _, line := range strings.Split(string(committed), "\n") {
		if m := readmeRowRE.FindStringSubmatch(line); m != nil && m[1] != "Key" && !strings.HasPrefix(m[1], "-") {
			rows[m[1]] = strings.TrimSpace(m[4])
		}
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	keys, leaves := valueKeys("", values)
	if len(leaves) < 50 {
		t.Fatalf("only %d values found in values.yaml", len(leaves))
	}
	// A value is documented by its own row or by the row of an object it is part of.
	for _, k := range leaves {
		p := k
		for ; p != ""; p = parentKey(p) {
			if _, ok := rows[p]; ok {
				break
			}
		}
		switch {
		case p == "":
			t.Errorf("value %s is not documented in README.md: add a `# --` comment above it (or its object) in values.yaml and run `make chart-docs`", k)
		case rows[p] == "":
			t.Errorf("value %s: README row %s has no description (a `# --` comment above it in values.yaml)", k, p)
		}
	}
	for row := range rows {
		if !slices.Contains(keys, row) {
			t.Errorf("README.md documents %s, which values.yaml lacks: run `make chart-docs`", row)
		}
	}

	// values.schema.json knows every key (it forbids the others), so the two stay in step.
	var schema schemaNode
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !schema.has(strings.Split(k, ".")) {
			t.Errorf("values.schema.json does not describe %s", k)
		}
	}
}

// valueKeys lists every key path of a values map (objects and their keys
// alike, not into lists) and, of those, the values: keys that hold no
// non-empty object.
func valueKeys(prefix string, m map[string]any) (keys, leaves []string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		keys = append(keys, p)
		if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 {
			ks, ls := valueKeys(p, sub)
			keys, leaves = append(keys, ks...), append(leaves, ls...)
		} else {
			leaves = append(leaves, p)
		}
	}
	return keys, leaves
}

func parentKey(k string) string {
	i := strings.LastIndex(k, ".")
	if i < 0 {
		return ""
	}
	return k[:i]
}

// schemaNode is the part of a JSON schema that names object keys.
type schemaNode struct {
	Properties map[string]schemaNode `json:"properties"`
}

// has reports whether the schema describes the key path: a named property,
// or any key of a free-form object (no properties: config.global, resources, ...).
func (s schemaNode) has(path []string) bool {
	if len(path) == 0 {
		return true
	}
	if p, ok := s.Properties[path[0]]; ok {
		return p.has(path[1:])
	}
	return s.Properties == nil
}
