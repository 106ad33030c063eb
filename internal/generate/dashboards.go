package generate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/grafana"
	"github.com/dbcanary/dbcanary/internal/ledger"
	"github.com/dbcanary/dbcanary/probes"
)

// Every query selects targets with this matcher; the lint test checks it.
const targetMatcher = `target=~"$target"`

var ds = &grafana.DatasourceRef{Type: "prometheus", UID: "${datasource}"}

// board accumulates panels on a 24-column grid, three 8-wide panels a row.
type board struct {
	d      grafana.Dashboard
	nextID int
	x, y   int
}

func newBoard(uid, title, desc, targetFilter string) *board {
	q := fmt.Sprintf("label_values(dbcanary_target_up%s, target)", targetFilter)
	return &board{d: grafana.Dashboard{
		UID: uid, Title: title, Description: desc, Tags: []string{"dbcanary"}, Timezone: "browser", Editable: false,
		GraphTooltip: 1, Refresh: "30s", SchemaVersion: grafana.SchemaVersion, Version: 1,
		Time: grafana.TimeRange{From: "now-6h", To: "now"},
		// Grafana's built-in annotations (this board's annotations and alerts).
		Annotations: grafana.Annotations{List: []grafana.Annotation{{BuiltIn: 1, Datasource: &grafana.DatasourceRef{Type: "grafana", UID: "-- Grafana --"},
			Enable: true, Hide: true, IconColor: "rgba(0, 211, 255, 1)", Name: "Annotations & Alerts", Type: "dashboard"}}},
		Links: []grafana.Link{{Title: "dbcanary boards", Type: "dashboards", Icon: "external link", Tooltip: "The other dbcanary boards",
			Tags: []string{"dbcanary"}, AsDropdown: true, IncludeVars: true, KeepTime: true}},
		Templating: grafana.Templating{List: []grafana.Variable{
			// current "default": Grafana's default Prometheus until the user picks one.
			{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus", Current: map[string]any{"text": "default", "value": "default"}, Options: []any{}},
			{Name: "target", Label: "Target", Type: "query", Datasource: ds, Query: grafana.VariableQuery{Query: q, RefID: "target"},
				Definition: q, Refresh: 2, Multi: true, IncludeAll: true, AllValue: ".*", Sort: 1,
				Current: map[string]any{"text": []string{"All"}, "value": []string{"$__all"}}, Options: []any{}},
		}},
	}}
}

func (b *board) row(title string) {
	if b.x > 0 {
		b.x, b.y = 0, b.y+8
	}
	b.nextID++
	b.d.Panels = append(b.d.Panels, grafana.Panel{ID: b.nextID, Type: "row", Title: title, GridPos: grafana.GridPos{H: 1, W: 24, X: 0, Y: b.y}, Panels: []grafana.Panel{}})
	b.y++
}

// add places a panel; stat panels are 4 wide, the rest 8.
func (b *board) add(p grafana.Panel) {
	w := 8
	if p.Type == "stat" {
		w = 4
	}
	if b.x+w > 24 {
		b.x, b.y = 0, b.y+8
	}
	b.nextID++
	p.ID = b.nextID
	p.GridPos = grafana.GridPos{H: 8, W: w, X: b.x, Y: b.y}
	p.Datasource = ds
	b.x += w
	b.d.Panels = append(b.d.Panels, p)
}

type query struct{ expr, legend string }

func f64(v float64) *float64 { return &v }

// steps builds thresholds: green base, then each (color, value).
func steps(cv ...any) *grafana.Thresholds {
	t := &grafana.Thresholds{Mode: "absolute", Steps: []grafana.Step{{Color: "green"}}}
	for i := 0; i+1 < len(cv); i += 2 {
		t.Steps = append(t.Steps, grafana.Step{Color: cv[i].(string), Value: f64(cv[i+1].(float64))})
	}
	return t
}

func timeseries(title, desc, unit string, th *grafana.Thresholds, qs ...query) grafana.Panel {
	style := "off"
	if len(th.Steps) > 1 {
		style = "line+area"
	}
	p := grafana.Panel{Type: "timeseries", Title: title, Description: desc,
		FieldConfig: &grafana.FieldConfig{Defaults: grafana.FieldDefaults{Unit: unit, Min: f64(0), Thresholds: th, Mappings: []any{},
			Color:  map[string]any{"mode": "palette-classic"},
			Custom: map[string]any{"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "showPoints": "never", "spanNulls": false, "thresholdsStyle": map[string]any{"mode": style}}},
			Overrides: []any{}},
		Options: map[string]any{"legend": map[string]any{"displayMode": "table", "placement": "bottom", "calcs": []string{"lastNotNull", "max"}, "showLegend": true},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"}}}
	for i, q := range qs {
		p.Targets = append(p.Targets, grafana.Target{RefID: string(rune('A' + i)), Datasource: ds, Expr: q.expr, LegendFormat: q.legend, Range: true})
	}
	return p
}

func stat(title, desc, unit string, th *grafana.Thresholds, q query) grafana.Panel {
	p := timeseries(title, desc, unit, th, q)
	p.Type = "stat"
	p.FieldConfig.Defaults.Custom = nil
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	p.Options = map[string]any{"colorMode": "background", "graphMode": "none", "justifyMode": "auto", "orientation": "auto", "textMode": "value_and_name",
		"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false}}
	p.Targets[0].Range, p.Targets[0].Instant = false, true
	return p
}

// m renders a selector with the backend, extra matchers and the target matcher.
func m(name, backend string, extra ...string) string {
	parts := []string{}
	if backend != "" {
		parts = append(parts, fmt.Sprintf(`backend="%s"`, backend))
	}
	parts = append(parts, extra...)
	parts = append(parts, targetMatcher)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// boardData is what the boards need from the baseline.
type boardData struct {
	b          *baseline.File
	thresholds map[string][2]Threshold // backend/op/phase → warning, critical
	figures    map[string][]baseline.Figure
}

func key(backend, op, phase string) string { return backend + "/" + op + "/" + phase }

func newBoardData(b *baseline.File) (*boardData, error) {
	th, err := Thresholds(b)
	if err != nil {
		return nil, err
	}
	d := &boardData{b: b, thresholds: map[string][2]Threshold{}, figures: map[string][]baseline.Figure{}}
	for _, t := range th {
		if t.Target != "" {
			continue // boards draw backend-wide lines; a target's own threshold is in its alert
		}
		k := key(t.Backend, t.Op, t.Phase)
		p := d.thresholds[k]
		if t.Severity == "warning" {
			p[0] = t
		} else {
			p[1] = t
		}
		d.thresholds[k] = p
	}
	for _, f := range b.Figures {
		for _, op := range f.Ops {
			k := key(f.Backend, op, f.Phase)
			d.figures[k] = append(d.figures[k], f)
		}
	}
	return d, nil
}

// latencySteps are the warning and critical bounds of an op (base only if none).
func (d *boardData) latencySteps(backend, op, phase string) *grafana.Thresholds {
	t, ok := d.thresholds[key(backend, op, phase)]
	if !ok {
		return steps()
	}
	return steps("orange", t[0].Bound, "red", t[1].Bound)
}

// figureNote lists the documented figures of an op for a panel description.
func (d *boardData) figureNote(backend, op, phase string) string {
	var s []string
	for _, f := range d.figures[key(backend, op, phase)] {
		s = append(s, fmt.Sprintf("%s %s %s (%s; %s)", f.Stat, strings.TrimSpace(fmtFigure(f)), f.Use, f.Source, f.Conditions))
	}
	if t, ok := d.thresholds[key(backend, op, phase)]; ok {
		s = append(s, fmt.Sprintf("threshold lines: warning %gs, critical %gs", t[0].Bound, t[1].Bound))
	}
	if len(s) == 0 {
		return "No documented figure for this op: watch its drift (DbcanaryLatencyDrift)."
	}
	return "Baselines: " + strings.Join(s, "; ") + "."
}

// hasAlertFigure reports whether any op (of any phase) of the backend has thresholds.
func (d *boardData) hasAlertFigure(backend string, phase bool) bool {
	for k := range d.thresholds {
		parts := strings.Split(k, "/")
		if parts[0] == backend && (parts[2] != "") == phase {
			return true
		}
	}
	return false
}

func overview(d *boardData, backends []backend) grafana.Dashboard {
	f := d.b.Factors
	budget := 1 - d.b.Policy.SLOObjective
	bd := newBoard("dbcanary-overview", "dbcanary / Overview",
		"Every target dbcanary probes: availability, errors, latency against the documented baselines (baselines/*.yaml), throughput.", "")
	for _, be := range backends {
		bd.row(be.Title)
		bd.add(stat(be.Title+" targets up", "dbcanary_target_up: 1 when the last op reached the store.", "none", steps("red", 0.0, "green", 1.0),
			query{fmt.Sprintf("min by (target) (%s)", m("dbcanary_target_up", be.Name)), "{{target}}"}))
		bd.add(timeseries(be.Title+" error ratio", fmt.Sprintf("Failed ops / attempts over 5m. Lines: the %s error budget (SLO %s) and the %s warning.",
			pct(budget), pct(d.b.Policy.SLOObjective), pct(d.b.Policy.ErrorRatioWarning)), "percentunit",
			steps("orange", round(budget), "red", d.b.Policy.ErrorRatioWarning),
			query{m(RecOpErrorRatio, be.Name), "{{target}} {{op}}"}))
		var qs []query
		if d.hasAlertFigure(be.Name, false) {
			qs = append(qs, query{fmt.Sprintf(`%s / on (backend, op, quantile) group_left () %s{backend="%s",use="alert"}`,
				m(RecLatencyQuantile, be.Name, `quantile="0.99"`), RecLatencyBaseline, be.Name), "{{target}} {{op}}"})
		}
		if d.hasAlertFigure(be.Name, true) {
			qs = append(qs, query{fmt.Sprintf(`%s / on (backend, op, phase, quantile) group_left () %s{backend="%s",use="alert"}`,
				m(RecPhaseQuantile, be.Name, `quantile="0.99"`), RecPhaseBaseline, be.Name), "{{target}} {{op}} {{phase}}"})
		}
		if len(qs) > 0 {
			bd.add(timeseries(be.Title+" p99 / baseline p99",
				fmt.Sprintf("The canary's p99 over 5m divided by the documented p99 of the same op (measured under benchmark load). Lines: warning at %gx, critical at %gx (factors in the baseline file).", f.Warning, f.Critical),
				"suffix:x", steps("orange", f.Warning, "red", f.Critical), qs...))
		}
		latency := []query{{m(RecLatencyQuantile, be.Name, `quantile=~"0.5|0.99"`), "{{target}} {{op}} p{{quantile}}"}}
		desc := "Latency from each op's intended start (open loop), successful ops."
		if d.hasAlertFigure(be.Name, false) {
			// Only backends with op-latency figures get baseline lines here; phase
			// figures (S3 first/last byte) are on the p99 / baseline panel.
			latency = append(latency, query{fmt.Sprintf(`%s{backend="%s",use="alert"} and on (backend, op) group by (backend, op) (%s)`, RecLatencyBaseline, be.Name, m(RecLatencyQuantile, be.Name)), "baseline {{op}} p99"})
			desc += " The baseline lines are the documented p99 ceilings of the same ops."
		}
		bd.add(timeseries(be.Title+" p50 / p99 latency", desc, "s", steps(), latency...))
		bd.add(timeseries(be.Title+" throughput", "Ops per second by op and result, over 5m. The canary's rate is its config's, far below the benchmarks' (see the backend board).", "ops", steps(),
			query{m(RecOpsRate, be.Name), "{{target}} {{op}} {{result}}"}))
	}
	return bd.d
}

// ownPanel draws one of a backend's own panels (probes.Panel): its queries
// select the backend, its ops and the target variable.
func ownPanel(d *boardData, be backend, p probes.Panel) grafana.Panel {
	unit, lines := "s", steps()
	switch p.Queries[0].Series {
	case probes.SeriesLatencyVsBaseline:
		unit, lines = "suffix:x", steps("orange", d.b.Factors.Warning, "red", d.b.Factors.Critical)
	case probes.SeriesBytes:
		unit = "Bps"
	}
	desc := p.Description
	if p.ThresholdsOf != "" {
		lines = d.latencySteps(be.Name, p.ThresholdsOf, "")
		desc += " " + d.figureNote(be.Name, p.ThresholdsOf, "")
	}
	queries := make([]query, len(p.Queries))
	for i, q := range p.Queries {
		var extra []string
		if q.Direction != "" {
			extra = append(extra, fmt.Sprintf(`direction="%s"`, q.Direction))
		}
		if q.Ops != "" {
			extra = append(extra, fmt.Sprintf(`op=~%q`, q.Ops)) // quoted: a probe's regexp may hold a backslash
		}
		if q.Quantile != 0 {
			extra = append(extra, fmt.Sprintf(`quantile="%s"`, qs(q.Quantile)))
		}
		switch q.Series {
		case probes.SeriesLatency:
			queries[i] = query{m(RecLatencyQuantile, be.Name, extra...), q.Legend}
		case probes.SeriesLatencyVsBaseline:
			queries[i] = query{fmt.Sprintf(`%s / on (backend, op, quantile) group_left () %s{backend="%s",use="alert"}`,
				m(RecLatencyQuantile, be.Name, extra...), RecLatencyBaseline, be.Name), q.Legend}
		case probes.SeriesBytes:
			queries[i] = query{m(RecBytesRate, be.Name, extra...), q.Legend}
		}
	}
	return timeseries(p.Title, desc, unit, lines, queries...)
}

// backendBoard is one board per backend: per-op latency against its baseline,
// rates, errors by cause, bytes and in-flight ops.
func backendBoard(d *boardData, be backend) grafana.Dashboard {
	bd := newBoard("dbcanary-"+be.Name, "dbcanary / "+be.Title,
		be.Title+" canary ops against the documented baselines (baselines/*.yaml).", fmt.Sprintf(`{backend="%s"}`, be.Name))
	bd.row("Health")
	bd.add(stat("Targets up", "dbcanary_target_up: 1 when the last op reached the store.", "none", steps("red", 0.0, "green", 1.0),
		query{m("dbcanary_target_up", be.Name), "{{target}}"}))
	bd.add(stat("Seconds since last success", fmt.Sprintf("Per op; DbcanaryCanaryStale fires above %s.", d.b.Policy.StaleAfter), "s",
		steps("orange", 60.0, "red", float64(d.b.Policy.StaleAfter)/1e9), query{fmt.Sprintf("time() - %s", m("dbcanary_last_success_timestamp_seconds", be.Name)), "{{target}} {{op}}"}))
	bd.add(timeseries("Error ratio", "Failed ops / attempts over 5m.", "percentunit", steps("orange", round(1-d.b.Policy.SLOObjective), "red", d.b.Policy.ErrorRatioWarning),
		query{m(RecOpErrorRatio, be.Name), "{{target}} {{op}}"}))
	bd.add(timeseries("Failures by cause", "Failures per second by cause over 5m; mismatch, lost and not_found are data integrity failures.", "ops", steps(),
		query{m(RecFailuresRate, be.Name), "{{target}} {{op}} {{cause}}"}))
	bd.add(timeseries("Ops in flight", "Ops running now per target (bounded by max_in_flight; at the bound, new ops fail with cause backlog).", "none", steps(),
		query{m("dbcanary_op_in_flight", be.Name), "{{target}}"}))

	bd.row("Latency per op (p50 / p90 / p99, lines at the baseline thresholds)")
	for _, p := range be.Panels {
		bd.add(ownPanel(d, be, p))
	}
	for _, op := range be.Ops {
		if len(op.Phases) > 0 {
			last := op.Phases[len(op.Phases)-1]
			notes := make([]string, len(op.Phases))
			for i, ph := range op.Phases {
				notes[i] = d.figureNote(be.Name, op.Name, ph)
			}
			title := op.Title
			if title == "" {
				title = op.Name + ": " + strings.Join(op.Phases, " vs ")
			}
			bd.add(timeseries(title, fmt.Sprintf("p50 and p99 of each phase; lines at the %s thresholds. ", last)+strings.Join(notes, " "),
				"s", d.latencySteps(be.Name, op.Name, last),
				query{m(RecPhaseQuantile, be.Name, fmt.Sprintf(`op="%s"`, op.Name), `quantile=~"0.5|0.99"`), "{{target}} {{phase}} p{{quantile}}"}))
			continue
		}
		title := op.Title
		if title == "" {
			title = op.Name
		}
		bd.add(timeseries(title, d.figureNote(be.Name, op.Name, ""), "s", d.latencySteps(be.Name, op.Name, ""),
			query{m(RecLatencyQuantile, be.Name, fmt.Sprintf(`op="%s"`, op.Name)), "{{target}} p{{quantile}}"}))
	}

	if be.hasOp(ledger.OpCheck, "") {
		bd.row("Durability ledger (acknowledged writes re-read at ages)")
		bd.add(stat("Acknowledged writes missing or corrupted (24h)",
			"Ledger checks that found an acknowledged write gone or changed over the last day; DbcanaryDurabilityLoss pages on the first one. See docs/ledger.md.", "none",
			steps("green", 0.0, "red", 1.0),
			query{fmt.Sprintf(`sum by (target) (increase(%s[24h]))`, m("dbcanary_ledger_checks_total", be.Name, `result=~"missing|corrupted"`)), "{{target}}"}))
		bd.add(timeseries("Ledger checks by age and result", "Checks per age (1m, 10m, 1h, ...) and result (intact, missing, corrupted) over the last hour.", "none", steps(),
			query{fmt.Sprintf(`sum by (target, age, result) (increase(%s[1h]))`, m("dbcanary_ledger_checks_total", be.Name)), "{{target}} {{age}} {{result}}"}))
		bd.add(timeseries("Ledger entries held", "Acknowledged writes the ledger holds for re-reading (bounded by ledger.max_entries).", "none", steps(),
			query{m("dbcanary_ledger_entries", be.Name), "{{target}}"}))
		bd.add(timeseries("Oldest ledger entry", "Age of the oldest acknowledged write still to be re-read: how far back the ledger reaches.", "s", steps(),
			query{m("dbcanary_ledger_oldest_entry_age_seconds", be.Name), "{{target}}"}))
	}

	bd.row("Throughput")
	bd.add(timeseries("Ops per second", "By op and result over 5m.", "ops", steps(), query{m(RecOpsRate, be.Name), "{{target}} {{op}} {{result}}"}))
	bd.add(timeseries("Payload bytes per second", "Sent and received payload bytes over 5m.", "Bps", steps(), query{m(RecBytesRate, be.Name), "{{target}} {{op}} {{direction}}"}))
	return bd.d
}

// Dashboards builds the overview and one board per backend, by file name.
func Dashboards(b *baseline.File) (map[string]grafana.Dashboard, error) {
	d, err := newBoardData(b)
	if err != nil {
		return nil, err
	}
	bes, err := backends()
	if err != nil {
		return nil, err
	}
	out := map[string]grafana.Dashboard{"dbcanary-overview.json": overview(d, bes)}
	for _, be := range bes {
		out["dbcanary-"+be.Name+".json"] = backendBoard(d, be)
	}
	return out, nil
}

// DashboardFiles renders every board as indented JSON, by file name under dashboards/.
func DashboardFiles(b *baseline.File, _ Options) (map[string][]byte, error) {
	boards, err := Dashboards(b)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(boards))
	for n := range boards {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string][]byte{}
	for _, n := range names {
		data, err := json.MarshalIndent(boards[n], "", "  ")
		if err != nil {
			return nil, err
		}
		out[n] = append(data, '\n')
	}
	return out, nil
}
