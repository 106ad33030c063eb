package main

import (
	"fmt"
	"path/filepath"
	"time"
)

// Plan is everything the page needs to draw a board: each visible panel's
// place, display settings and queries. The page gets it as /plan.json.
type Plan struct {
	Board  string      `json:"board"` // the board file's name
	Title  string      `json:"title"`
	Vars   []string    `json:"vars"` // name=value, as substituted
	Note   string      `json:"note"` // a line under the title
	Start  int64       `json:"start"`
	End    int64       `json:"end"`
	Width  int         `json:"width"`
	Height int         `json:"height"`
	Panels []PlanPanel `json:"panels"`
}

// PlanPanel is one panel of the plan.
type PlanPanel struct {
	ID          int      `json:"id"`
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Box         Box      `json:"box"`
	Unit        string   `json:"unit"`
	Min         *float64 `json:"min"`
	Max         *float64 `json:"max"`
	Steps       []Step   `json:"steps"`
	Thresholds  string   `json:"thresholdsStyle"` // off, line, area, line+area, dashed, ...
	Calcs       []string `json:"calcs"`           // the legend table's columns
	ShowLegend  bool     `json:"showLegend"`
	Queries     []Query  `json:"queries"`
}

// PlanOptions say which board, how wide and over what time range.
type PlanOptions struct {
	Path    string
	Vars    map[string]string // -var name=value
	Width   int               // CSS pixels
	End     time.Time
	Range   time.Duration
	MinStep time.Duration // the scrape interval
	// Open, when set, names the rows drawn open; the others are drawn
	// collapsed (nil: every row as the board has it).
	Open map[string]bool
}

// MakePlan loads the board and builds its plan.
func MakePlan(o PlanOptions) (*Plan, error) {
	if o.Width < 600 {
		return nil, fmt.Errorf("width %d: want at least 600 px", o.Width)
	}
	if o.Range <= 0 || o.MinStep <= 0 {
		return nil, fmt.Errorf("range %s, min step %s: want both positive", o.Range, o.MinStep)
	}
	b, err := LoadBoard(o.Path)
	if err != nil {
		return nil, err
	}
	vals, err := b.VarValues(o.Vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", o.Path, err)
	}
	p := &Plan{Board: filepath.Base(o.Path), Title: b.Title, Start: o.End.Add(-o.Range).Unix(), End: o.End.Unix(), Width: o.Width}
	for _, v := range b.Templating.List {
		if val, ok := vals[v.Name]; ok {
			p.Vars = append(p.Vars, v.Name+"="+val)
		}
	}
	panels, err := visiblePanels(b.Panels, o.Open)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", o.Path, err)
	}
	for _, bp := range panels {
		pp, err := planPanel(bp, vals, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", o.Path, err)
		}
		p.Panels = append(p.Panels, pp)
		p.Height = max(p.Height, pp.Box.Top+pp.Box.Height)
	}
	return p, nil
}

func planPanel(bp Panel, vals map[string]string, o PlanOptions) (PlanPanel, error) {
	d := bp.FieldConfig.Defaults
	pp := PlanPanel{
		ID: bp.ID, Type: bp.Type, Title: bp.Title, Description: bp.Description,
		Box: Layout(bp.GridPos, o.Width), Unit: d.Unit, Min: d.Min, Max: d.Max,
		Steps: d.Thresholds.Steps, Thresholds: d.Custom.ThresholdsStyle.Mode,
		Calcs: bp.Options.Legend.Calcs, ShowLegend: bp.Options.Legend.ShowLegend,
	}
	if pp.Thresholds == "" {
		pp.Thresholds = "off"
	}
	qs, err := BuildQueries(bp, vals, o.End, o.Range, o.MinStep, pp.Box.Width)
	if err != nil {
		return PlanPanel{}, err
	}
	pp.Queries = qs
	return pp, nil
}

// Exprs is the set of PromQL expressions of the plan: the only ones the
// proxy forwards.
func (p *Plan) Exprs() map[string]bool {
	m := map[string]bool{}
	for _, pp := range p.Panels {
		for _, q := range pp.Queries {
			m[q.Expr] = true
		}
	}
	return m
}
