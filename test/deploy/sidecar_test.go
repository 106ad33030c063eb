package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// docScrapeRE is the scrape job docs/deployment.md shows for a Prometheus without the operator.
var docScrapeRE = regexp.MustCompile("(?s)\\*\\*Prometheus without the operator\\.\\*\\*.*?```yaml\n(.*?)```")

// TestSidecarScrapeConfigDocumented: the job docs/deployment.md shows is the
// one of deploy/kubernetes/sidecar/prometheus-scrape.yml (which
// TestSidecarScrapeConfig runs), but for its scrape interval.
func TestSidecarScrapeConfigDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deployment.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := docScrapeRE.FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/deployment.md shows no scrape job for the sidecar under **Prometheus without the operator.**")
	}
	file, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", "sidecar", "prometheus-scrape.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var shown, shipped struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(m[1], &shown); err != nil {
		t.Fatalf("the documented job: %v", err)
	}
	if err := yaml.UnmarshalStrict(file, &shipped); err != nil {
		t.Fatal(err)
	}
	if len(shipped.ScrapeConfigs) != 1 {
		t.Fatalf("prometheus-scrape.yml holds %d jobs, want one", len(shipped.ScrapeConfigs))
	}
	delete(shipped.ScrapeConfigs[0], "scrape_interval")
	if !reflect.DeepEqual(shown, shipped) {
		a, _ := yaml.Marshal(shown)
		b, _ := yaml.Marshal(shipped)
		t.Errorf("docs/deployment.md shows another job than prometheus-scrape.yml:\ndoc:\n%s\nfile:\n%s", a, b)
	}
}
