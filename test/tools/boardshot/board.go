package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Board is the part of a Grafana board JSON (schema of dashboards/*.json, made
// by grafana-foundation-sdk) that boardshot draws.
type Board struct {
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is one panel or row of a board.
type Panel struct {
	ID          int      `json:"id"`
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Collapsed   bool     `json:"collapsed"`
	GridPos     GridPos  `json:"gridPos"`
	Targets     []Target `json:"targets"`
	Panels      []Panel  `json:"panels"` // a row's panels, drawn only when the row is open
	FieldConfig struct {
		Defaults FieldDefaults `json:"defaults"`
	} `json:"fieldConfig"`
	Options struct {
		Legend struct {
			ShowLegend bool     `json:"showLegend"`
			Calcs      []string `json:"calcs"`
		} `json:"legend"`
	} `json:"options"`
}

// GridPos is a panel's place on Grafana's 24-column grid, in grid units.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// FieldDefaults are the display settings boardshot honours: unit, axis
// bounds, thresholds and how they are drawn.
type FieldDefaults struct {
	Unit       string   `json:"unit"`
	Min        *float64 `json:"min"`
	Max        *float64 `json:"max"`
	Thresholds struct {
		Steps []Step `json:"steps"`
	} `json:"thresholds"`
	Custom struct {
		ThresholdsStyle struct {
			Mode string `json:"mode"`
		} `json:"thresholdsStyle"`
	} `json:"custom"`
}

// Step is one threshold step; a nil Value is the base step.
type Step struct {
	Value *float64 `json:"value"`
	Color string   `json:"color"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Instant      bool   `json:"instant"`
}

// Variable is one template variable of the board.
type Variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
}

// LoadBoard reads and decodes a board JSON file.
func LoadBoard(path string) (*Board, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var board Board
	if err := json.Unmarshal(b, &board); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(board.Panels) == 0 {
		return nil, fmt.Errorf("%s: the board has no panels", path)
	}
	return &board, nil
}

// VarValues are the values boardshot gives the board's query variables:
// a value set on the command line (name=value, regex-escaped for a PromQL
// string as Grafana does for a Prometheus variable: `a.b` becomes `a\\.b`),
// else the variable's All value.
func (b *Board) VarValues(set map[string]string) (map[string]string, error) {
	vals := map[string]string{}
	known := map[string]bool{}
	for _, v := range b.Templating.List {
		known[v.Name] = true
		if v.Type != "query" && v.Type != "custom" {
			continue // the datasource variable names no label value
		}
		if s, ok := set[v.Name]; ok {
			vals[v.Name] = strings.ReplaceAll(regexp.QuoteMeta(s), `\`, `\\`)
			continue
		}
		if !v.IncludeAll {
			return nil, fmt.Errorf("variable %q has no All value: give it one with -var %s=VALUE", v.Name, v.Name)
		}
		vals[v.Name] = v.AllValue
		if vals[v.Name] == "" {
			vals[v.Name] = ".*" // Grafana's All without a custom all value: every value, here as a regex
		}
	}
	for name := range set {
		if !known[name] {
			return nil, fmt.Errorf("-var %s: the board has no variable %q", name, name)
		}
	}
	return vals, nil
}

// varRef matches $name, ${name} and ${name:format} references.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// Substitute replaces the variable references of a PromQL expression with
// vals; a reference to a variable vals does not hold is an error naming it.
func Substitute(expr string, vals map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		v, ok := vals[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown variable %s in %q", strings.Join(missing, ", "), expr)
	}
	return out, nil
}

// Grafana's grid: 24 columns, rows of 30 px, 8 px between panels.
const (
	gridColumns = 24
	cellHeight  = 30
	cellMargin  = 8
)

// Box is a panel's place on the page, in CSS pixels.
type Box struct {
	Left   int `json:"left"`
	Top    int `json:"top"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Layout places a panel's gridPos on a page width px wide as Grafana's grid
// does (react-grid-layout: columns of equal width, cellMargin between them).
func Layout(g GridPos, width int) Box {
	colWidth := float64(width-cellMargin*(gridColumns-1)) / gridColumns
	return Box{
		Left:   int(math.Round((colWidth + cellMargin) * float64(g.X))),
		Top:    (cellHeight + cellMargin) * g.Y,
		Width:  int(math.Round(colWidth*float64(g.W) + float64(max(0, g.W-1)*cellMargin))),
		Height: cellHeight*g.H + max(0, g.H-1)*cellMargin,
	}
}

// Query is one panel query as the page sends it, through boardshot's proxy,
// to Prometheus: /api/v1/query at End when Instant, else /api/v1/query_range.
type Query struct {
	RefID   string `json:"refId"`
	Expr    string `json:"expr"`
	Legend  string `json:"legend"`
	Instant bool   `json:"instant"`
	Start   int64  `json:"start"` // Unix seconds
	End     int64  `json:"end"`
	Step    int64  `json:"step"` // seconds
}

// Step is the query_range step for a panel width px wide over rng: one point
// per pixel at most, never finer than minStep (the scrape interval), in whole
// seconds, as Grafana's $__interval.
func QueryStep(rng, minStep time.Duration, widthPx int) int64 {
	step := rng / time.Duration(max(widthPx, 1))
	step = max(step, minStep)
	return int64(math.Ceil(step.Seconds()))
}

// BuildQueries makes a panel's queries for the time range [end-rng, end].
func BuildQueries(p Panel, vals map[string]string, end time.Time, rng, minStep time.Duration, widthPx int) ([]Query, error) {
	var qs []Query
	for _, t := range p.Targets {
		expr, err := Substitute(t.Expr, vals)
		if err != nil {
			return nil, fmt.Errorf("panel %q (id %d) query %s: %v", p.Title, p.ID, t.RefID, err)
		}
		qs = append(qs, Query{
			RefID: t.RefID, Expr: expr, Legend: t.LegendFormat, Instant: t.Instant,
			Start: end.Add(-rng).Unix(), End: end.Unix(), Step: QueryStep(rng, minStep, widthPx),
		})
	}
	return qs, nil
}

// visiblePanels are the panels Grafana shows: top-level panels and rows, and
// the panels of open rows (a collapsed row shows its header only), in grid
// order. With open set, a row whose title it does not hold is drawn
// collapsed, as a person collapses it in Grafana: its panels go and what is
// below moves up by their height.
func visiblePanels(ps []Panel, open map[string]bool) ([]Panel, error) {
	var flat []Panel
	for _, p := range ps {
		flat = append(flat, p)
		if p.Type == "row" && !p.Collapsed {
			flat = append(flat, p.Panels...)
		}
	}
	sortGrid(flat)
	if open == nil {
		return flat, nil
	}
	rows := map[string]bool{}
	var out []Panel
	shift, hiding := 0, false
	for i, p := range flat {
		if p.Type == "row" {
			rows[p.Title] = true
			hiding = !open[p.Title]
			p.Collapsed = hiding
			p.GridPos.Y -= shift
			out = append(out, p)
			if hiding {
				shift += rowContentHeight(flat[i+1:])
			}
			continue
		}
		if hiding {
			continue
		}
		p.GridPos.Y -= shift
		out = append(out, p)
	}
	for title := range open {
		if !rows[title] {
			return nil, fmt.Errorf("-open %q: the board has no row of that title", title)
		}
	}
	return out, nil
}

// rowContentHeight is the height of the panels under a row, up to the next
// row: the grid units that go when the row collapses.
func rowContentHeight(below []Panel) int {
	if len(below) == 0 || below[0].Type == "row" {
		return 0
	}
	top, bottom := below[0].GridPos.Y, below[0].GridPos.Y
	for _, p := range below {
		if p.Type == "row" {
			return p.GridPos.Y - top
		}
		bottom = max(bottom, p.GridPos.Y+p.GridPos.H)
	}
	return bottom - top
}

func sortGrid(ps []Panel) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].GridPos.Y != ps[j].GridPos.Y {
			return ps[i].GridPos.Y < ps[j].GridPos.Y
		}
		return ps[i].GridPos.X < ps[j].GridPos.X
	})
}
