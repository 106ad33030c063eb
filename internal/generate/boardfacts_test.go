package generate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// compareBoardsEnv names a directory of boards (e.g. the committed boards of
// an older commit) whose facts TestBoardFacts compares with the committed ones.
const compareBoardsEnv = "DBCANARY_COMPARE_BOARDS"

// TestBoardFacts reads the committed boards as plain JSON, by the paths
// Grafana and test/e2e read (panels[].targets[].expr, the target variable's
// query object), not through the SDK model that wrote them: every panel but a
// row has queries, the target variable has its label_values query. With
// DBCANARY_COMPARE_BOARDS=<dir> it also compares each board's facts (panel
// title, type, gridPos, unit, min/max, threshold steps, queries and legends;
// variables, links, annotations and board settings) with the board of the same
// name in dir, e.g. `git show OLD:dashboards/x.json > dir/x.json` for each board.
func TestBoardFacts(t *testing.T) {
	committed, err := filepath.Glob(filepath.Join(repoRoot(), "dashboards", "*.json"))
	if err != nil || len(committed) == 0 {
		t.Fatalf("committed boards: %v %v", committed, err)
	}
	other := os.Getenv(compareBoardsEnv)
	for _, p := range committed {
		name := filepath.Base(p)
		facts := boardFacts(t, name, readFile(t, p))
		if other == "" {
			continue
		}
		old := boardFacts(t, name, readFile(t, filepath.Join(other, name)))
		for _, f := range old {
			if !slices.Contains(facts, f) {
				t.Errorf("%s: lost %s", name, f)
			}
		}
		for _, f := range facts {
			if !slices.Contains(old, f) {
				t.Errorf("%s: gained %s", name, f)
			}
		}
		t.Logf("%s: %d facts compared with %s", name, len(facts), other)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// boardFacts is what a board shows, one line a fact, read from its JSON.
func boardFacts(t *testing.T, name string, data []byte) []string {
	t.Helper()
	var db struct {
		UID           string            `json:"uid"`
		Title         string            `json:"title"`
		Description   string            `json:"description"`
		Tags          []string          `json:"tags"`
		Timezone      string            `json:"timezone"`
		Editable      *bool             `json:"editable"`
		GraphTooltip  int               `json:"graphTooltip"`
		Refresh       string            `json:"refresh"`
		SchemaVersion int               `json:"schemaVersion"`
		Time          map[string]string `json:"time"`
		Annotations   struct {
			List []map[string]any `json:"list"`
		} `json:"annotations"`
		Links      []map[string]any `json:"links"`
		Templating struct {
			List []struct {
				Name       string         `json:"name"`
				Label      string         `json:"label"`
				Type       string         `json:"type"`
				Query      any            `json:"query"`
				Definition string         `json:"definition"`
				Datasource map[string]any `json:"datasource"`
				Refresh    int            `json:"refresh"`
				Multi      bool           `json:"multi"`
				IncludeAll bool           `json:"includeAll"`
				AllValue   string         `json:"allValue"`
				Sort       int            `json:"sort"`
				Current    map[string]any `json:"current"`
				Hide       int            `json:"hide"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID          int            `json:"id"`
			Type        string         `json:"type"`
			Title       string         `json:"title"`
			Description string         `json:"description"`
			GridPos     map[string]int `json:"gridPos"`
			Datasource  map[string]any `json:"datasource"`
			Collapsed   bool           `json:"collapsed"`
			Panels      []any          `json:"panels"`
			Targets     []struct {
				RefID        string         `json:"refId"`
				Datasource   map[string]any `json:"datasource"`
				Expr         string         `json:"expr"`
				LegendFormat string         `json:"legendFormat"`
				Range        bool           `json:"range"`
				Instant      bool           `json:"instant"`
			} `json:"targets"`
			FieldConfig *struct {
				Defaults struct {
					Unit       string         `json:"unit"`
					Min        *float64       `json:"min"`
					Max        *float64       `json:"max"`
					Decimals   *float64       `json:"decimals"`
					Thresholds any            `json:"thresholds"`
					Color      any            `json:"color"`
					Custom     map[string]any `json:"custom"`
				} `json:"defaults"`
				Overrides []any `json:"overrides"`
			} `json:"fieldConfig"`
			Options map[string]any `json:"options"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &db); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	facts := []string{
		fmt.Sprintf("board uid=%s title=%q description=%q tags=%v timezone=%s editable=%v graphTooltip=%d refresh=%s schemaVersion=%d time=%v",
			db.UID, db.Title, db.Description, db.Tags, db.Timezone, js(db.Editable), db.GraphTooltip, db.Refresh, db.SchemaVersion, db.Time),
		"annotations " + js(db.Annotations.List),
	}
	for _, l := range db.Links {
		delete(l, "placement") // the SDK's default, cleared by board.build
		facts = append(facts, "link "+js(l))
	}
	for _, v := range db.Templating.List {
		facts = append(facts, "variable "+js(v))
		if v.Name != "target" {
			continue
		}
		// test/e2e reads the target variable's query as an object with a query string.
		var q struct{ Query string }
		if err := json.Unmarshal([]byte(js(v.Query)), &q); err != nil || !strings.HasPrefix(q.Query, "label_values(") {
			t.Errorf("%s: target variable query %s is not {query: label_values(...)}", name, js(v.Query))
		}
	}
	for _, p := range db.Panels {
		where := fmt.Sprintf("panel %d %s %q", p.ID, p.Type, p.Title)
		facts = append(facts, fmt.Sprintf("%s gridPos=%v description=%q datasource=%s", where, p.GridPos, p.Description, js(p.Datasource)))
		if p.Type == "row" {
			facts = append(facts, fmt.Sprintf("%s collapsed=%v panels=%d", where, p.Collapsed, len(p.Panels)))
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: %s has no targets[].expr", name, where)
		}
		for _, q := range p.Targets {
			facts = append(facts, fmt.Sprintf("%s query %s expr=%q legend=%q range=%v instant=%v datasource=%s",
				where, q.RefID, q.Expr, q.LegendFormat, q.Range, q.Instant, js(q.Datasource)))
		}
		if p.FieldConfig != nil {
			d := p.FieldConfig.Defaults
			facts = append(facts, fmt.Sprintf("%s unit=%s min=%s max=%s decimals=%s thresholds=%s color=%s custom=%s overrides=%d",
				where, d.Unit, js(d.Min), js(d.Max), js(d.Decimals), js(d.Thresholds), js(d.Color), js(d.Custom), len(p.FieldConfig.Overrides)))
		}
		opts := map[string]any{}
		for k, v := range p.Options {
			switch k {
			case "wideLayout", "showPercentChange", "percentChangeColorMode":
				// the SDK's stat defaults, Grafana's own defaults too
			default:
				opts[k] = v
			}
		}
		facts = append(facts, fmt.Sprintf("%s options=%s", where, js(opts)))
	}
	return facts
}
