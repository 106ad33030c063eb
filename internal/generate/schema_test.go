package generate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// TestBoardsStrictSchema decodes every generated board (built with the
// grafana-foundation-sdk's builders), and every committed one, with the SDK's
// strict decoder (pinned in go.mod):
// every field the dashboard schema requires is present (row panels' panels,
// the datasource variable's current, annotations, links' icon and tooltip,
// stat panels' orientation) and no field is unknown to it.
func TestBoardsStrictSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins() // panel options and queries decode by plugin type
	files, err := DashboardFiles(shippedBaseline(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join(repoRoot(), "dashboards", "*.json"))
	if err != nil || len(committed) == 0 {
		t.Fatalf("committed boards: %v %v", committed, err)
	}
	for _, p := range committed {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files["committed "+filepath.Base(p)] = data
	}
	for name, data := range files {
		strictSchema(t, name, data)
	}
}

// strictSchema decodes one board with the SDK's strict decoder.
func strictSchema(t *testing.T, name string, data []byte) {
	t.Helper()
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(data); err != nil {
		t.Errorf("%s fails the strict schema check:\n%v", name, err)
	}
}
