package generate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Every query selects targets with this matcher; the lint test checks it.
const targetMatcher = `target=~"$target"`

// placeMatchers select the Prometheus, cluster or vantage point a series
// comes from: external labels in a global view (Thanos, a federating
// Prometheus) or target labels set by relabelling. Every query carries them;
// a series without the label matches the variable's All (".*"). The recorded
// series keep them only when policy.aggregate_by names them
// (docs/alerts-dashboards.md).
var placeMatchers = []string{`cluster=~"$cluster"`, `vantage=~"$vantage"`}

// instanceMatcher selects the canary replica (its scrape address). Only the
// raw series carry it: the recording rules aggregate it away (a target
// moves between replicas when the replica count changes).
const instanceMatcher = `instance=~"$instance"`

// SchemaVersion is the dashboard schema the boards are written for. The SDK
// defaults to its own (newer) version and has no builder option for it, so
// board.build sets it on the built dashboard.
const SchemaVersion = 39

// ds is the Prometheus datasource every panel and query reads: the board's
// datasource variable.
var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// board accumulates panels on a 24-column grid, three 8-wide panels a row.
// Every panel gets its id and gridPos here (the SDK's own placement wraps
// only after a row overflows, so a 4-wide stat beside 8-wide panels would
// overflow it).
type board struct {
	d      *dashboard.DashboardBuilder
	nextID uint32
	x, y   uint32
}

func newBoard(uid, title, desc, backend string) *board {
	list := func(s string) dashboard.StringOrArrayOfString {
		return dashboard.StringOrArrayOfString{ArrayOfString: []string{s}}
	}
	one := func(s string) dashboard.StringOrArrayOfString {
		return dashboard.StringOrArrayOfString{String: cog.ToPtr(s)}
	}
	// Each variable's values are narrowed by the variables before it.
	within := func(matchers ...string) string {
		if backend != "" {
			matchers = append([]string{fmt.Sprintf(`backend="%s"`, backend)}, matchers...)
		}
		if len(matchers) == 0 {
			return "dbcanary_target_up"
		}
		return "dbcanary_target_up{" + strings.Join(matchers, ",") + "}"
	}
	variable := func(name, label, help, q string) *dashboard.QueryVariableBuilder {
		return dashboard.NewQueryVariableBuilder(name).Label(label).Description(help).Datasource(ds).
			// The Prometheus datasource's form of a variable query.
			Query(dashboard.StringOrMap{Map: map[string]any{"query": q, "refId": name}}).Definition(q).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Multi(true).IncludeAll(true).AllValue(".*").
			Sort(dashboard.VariableSortAlphabeticalAsc).Hide(dashboard.VariableHideDontHide).
			Current(dashboard.VariableOption{Text: list("All"), Value: list("$__all")})
	}
	d := dashboard.NewDashboardBuilder(title).Uid(uid).Description(desc).Tags([]string{"dbcanary"}).
		Timezone("browser").Readonly().Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").Version(1).Time("now-6h", "now").
		// Grafana's built-in annotations (this board's annotations and alerts).
		Annotation(dashboard.NewAnnotationQueryBuilder().BuiltIn(1).Name("Annotations & Alerts").Type("dashboard").
			Datasource(common.DataSourceRef{Type: cog.ToPtr("grafana"), Uid: cog.ToPtr("-- Grafana --")}).
			Enable(true).Hide(true).IconColor("rgba(0, 211, 255, 1)")).
		Link(dashboard.NewDashboardLinkBuilder("dbcanary boards").Type(dashboard.DashboardLinkTypeDashboards).
			Icon("external link").Tooltip("The other dbcanary boards").Tags([]string{"dbcanary"}).
			AsDropdown(true).TargetBlank(false).IncludeVars(true).KeepTime(true)).
		// current "default": Grafana's default Prometheus until the user picks one.
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus").
			Multi(false).IncludeAll(false).Hide(dashboard.VariableHideDontHide).
			Current(dashboard.VariableOption{Text: one("default"), Value: one("default")})).
		WithVariable(variable("cluster", "Cluster",
			"The cluster label (an external label of the Prometheus, or set by relabelling); empty when no series has one. The recorded series keep it when the rules are generated with policy.aggregate_by: [cluster].",
			fmt.Sprintf("label_values(%s, cluster)", within()))).
		WithVariable(variable("vantage", "Vantage",
			"The vantage label: where the canary probes from (a zone, a Helm mode: vantage Deployment); empty when no series has one.",
			fmt.Sprintf("label_values(%s, vantage)", within(placeMatchers[0])))).
		// Every raw series has an instance: All is ".+" (dashboard-linter's template-instance-rule).
		WithVariable(variable("instance", "Instance",
			"The canary replica (scrape address). Only the health, ledger and in-flight panels filter by it: the recorded latency, error and rate series aggregate over replicas.",
			fmt.Sprintf("label_values(%s, instance)", within(placeMatchers...))).AllValue(".+")).
		WithVariable(variable("target", "Target", "The store a canary target probes (dbcanary's target label).",
			fmt.Sprintf("label_values(%s, target)", within(append(slices.Clone(placeMatchers), instanceMatcher)...))))
	return &board{d: d}
}

// build returns the board. Two fields the builders cannot set are set here:
// the schema version, and no placement on the link and annotation (the SDK
// defaults both to "inControlsMenu", which moves them out of their usual
// place in Grafana versions with a controls menu).
func (b *board) build() (dashboard.Dashboard, error) {
	d, err := b.d.Build()
	if err != nil {
		return d, err
	}
	d.SchemaVersion = SchemaVersion
	for i := range d.Links {
		d.Links[i].Placement = nil
	}
	for i := range d.Annotations.List {
		d.Annotations.List[i].Placement = nil
	}
	return d, nil
}

func (b *board) row(title string) {
	if b.x > 0 {
		b.x, b.y = 0, b.y+8
	}
	b.nextID++
	b.d.WithRow(dashboard.NewRowBuilder(title).Id(b.nextID).GridPos(dashboard.GridPos{H: 1, W: 24, X: 0, Y: b.y}))
	b.y++
}

// place returns the next panel's id and position for a panel w wide.
func (b *board) place(w uint32) (uint32, dashboard.GridPos) {
	if b.x+w > 24 {
		b.x, b.y = 0, b.y+8
	}
	b.nextID++
	pos := dashboard.GridPos{H: 8, W: w, X: b.x, Y: b.y}
	b.x += w
	return b.nextID, pos
}

// addStat places a stat panel, 4 wide.
func (b *board) addStat(p *stat.PanelBuilder) {
	id, pos := b.place(4)
	b.d.WithPanel(p.Id(id).GridPos(pos))
}

// addTimeseries places a timeseries panel, 8 wide.
func (b *board) addTimeseries(p *timeseries.PanelBuilder) {
	id, pos := b.place(8)
	b.d.WithPanel(p.Id(id).GridPos(pos))
}

// addTimeline places a state timeline across the whole board.
func (b *board) addTimeline(p *statetimeline.PanelBuilder) {
	id, pos := b.place(24)
	b.d.WithPanel(p.Id(id).GridPos(pos))
}

// nodesPanel is each target's nodes side by side over time: up (green) or
// down (red), one line per node, from dbcanary_store_node_up.
func nodesPanel(be backend) *statetimeline.PanelBuilder {
	mapping := func(v, text, color string) dashboard.ValueMapping {
		return dashboard.ValueMapping{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{v: {Text: cog.ToPtr(text), Color: cog.ToPtr(color)}}}}
	}
	return statetimeline.NewPanelBuilder().Title(be.Title + " nodes").
		Description("dbcanary_store_node_up per target and node: up when the target last saw the node answer, down otherwise " +
			"(Cassandra: the driver's answering connections and gossip; OpenSearch: the client's dead/alive view of each address, or GET / every 30 s with one address; " +
			"RabbitMQ: the open connection, and an AMQP handshake to each other URL every node_check_interval). " +
			"DbcanaryStoreNodeDown (a warning) fires after 5 minutes down while the target still serves; a target that cannot serve pages DbcanaryTargetDown instead. See docs/clusters.md.").
		Datasource(ds).Unit("none").Min(0).Max(1).
		Mappings([]dashboard.ValueMapping{mapping("1", "up", "green"), mapping("0", "down", "red")}).
		Thresholds(steps()).
		ShowValue(common.VisibilityModeNever).MergeValues(true).RowHeight(0.9).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(false)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle).Sort(common.SortOrderNone)).
		WithTarget(promQuery(0, query{fmt.Sprintf("min by (target, node) (%s)", m("dbcanary_store_node_up", be.Name)), "{{target}} {{node}}"}).Range())
}

type query struct{ expr, legend string }

// steps builds absolute thresholds: green base, then each (color, value).
func steps(cv ...any) *dashboard.ThresholdsConfigBuilder {
	s := []dashboard.Threshold{{Color: "green"}}
	for i := 0; i+1 < len(cv); i += 2 {
		s = append(s, dashboard.Threshold{Color: cv[i].(string), Value: cog.ToPtr(cv[i+1].(float64))})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(s)
}

// promQuery is query i of a panel (refId A, B, ...) on the datasource variable.
func promQuery(i int, q query) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(string(rune('A' + i))).Datasource(ds).Expr(q.expr).LegendFormat(q.legend)
}

// timeseriesPanel draws queries over time with lines at the thresholds (none
// if th has only its base step).
func timeseriesPanel(title, desc, unit string, th *dashboard.ThresholdsConfigBuilder, qs ...query) *timeseries.PanelBuilder {
	style := common.GraphThresholdsStyleModeOff
	if t, err := th.Build(); err == nil && len(t.Steps) > 1 {
		style = common.GraphThresholdsStyleModeLineAndArea
	}
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).
		Unit(unit).Min(0).Thresholds(th).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdPaletteClassic)).
		DrawStyle(common.GraphDrawStyleLine).LineWidth(1).FillOpacity(0).ShowPoints(common.VisibilityModeNever).
		SpanNulls(common.BoolOrFloat64{Bool: cog.ToPtr(false)}).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(style)).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeTable).Placement(common.LegendPlacementBottom).
			Calcs([]string{"lastNotNull", "max"}).ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for i, q := range qs {
		p.WithTarget(promQuery(i, q).Range())
	}
	return p
}

// statPanel shows the last value of one instant query, coloured by the thresholds.
func statPanel(title, desc, unit string, th *dashboard.ThresholdsConfigBuilder, q query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).
		Unit(unit).Min(0).Thresholds(th).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdThresholds)).
		ColorMode(common.BigValueColorModeBackground).GraphMode(common.BigValueGraphModeNone).
		JustifyMode(common.BigValueJustifyModeAuto).Orientation(common.VizOrientationAuto).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false)).
		WithTarget(promQuery(0, q).Instant())
}

// m renders a selector with the backend, extra matchers, the place matchers,
// the instance matcher on a raw series (a recorded one has a colon in its
// name and no instance label) and the target matcher.
func m(name, backend string, extra ...string) string {
	parts := []string{}
	if backend != "" {
		parts = append(parts, fmt.Sprintf(`backend="%s"`, backend))
	}
	parts = append(parts, extra...)
	parts = append(parts, placeMatchers...)
	if !strings.Contains(name, ":") {
		parts = append(parts, instanceMatcher)
	}
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
func (d *boardData) latencySteps(backend, op, phase string) *dashboard.ThresholdsConfigBuilder {
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

func overview(d *boardData, backends []backend) (dashboard.Dashboard, error) {
	f := d.b.Factors
	budget := 1 - d.b.Policy.SLOObjective
	bd := newBoard("dbcanary-overview", "dbcanary / Overview",
		"Every target dbcanary probes: availability, errors, latency against the documented baselines (baselines/*.yaml), throughput.", "")
	for _, be := range backends {
		bd.row(be.Title)
		bd.addStat(statPanel(be.Title+" targets up", "dbcanary_target_up: 1 when the last op reached the store.", "none", steps("red", 0.0, "green", 1.0),
			query{fmt.Sprintf("min by (target) (%s)", m("dbcanary_target_up", be.Name)), "{{target}}"}))
		bd.addTimeseries(timeseriesPanel(be.Title+" error ratio", fmt.Sprintf("Failed ops / attempts over 5m. Lines: the %s error budget (SLO %s) and the %s warning.",
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
			bd.addTimeseries(timeseriesPanel(be.Title+" p99 / baseline p99",
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
		bd.addTimeseries(timeseriesPanel(be.Title+" p50 / p99 latency", desc, "s", steps(), latency...))
		bd.addTimeseries(timeseriesPanel(be.Title+" throughput", "Ops per second by op and result, over 5m. The canary's rate is its config's, far below the benchmarks' (see the backend board).", "ops", steps(),
			query{m(RecOpsRate, be.Name), "{{target}} {{op}} {{result}}"}))
	}
	return bd.build()
}

// ownPanel draws one of a backend's own panels (probes.Panel): its queries
// select the backend, its ops and the target variable.
func ownPanel(d *boardData, be backend, p probes.Panel) *timeseries.PanelBuilder {
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
	return timeseriesPanel(p.Title, desc, unit, lines, queries...)
}

// backendBoard is one board per backend: per-op latency against its baseline,
// rates, errors by cause, bytes and in-flight ops.
func backendBoard(d *boardData, be backend) (dashboard.Dashboard, error) {
	bd := newBoard("dbcanary-"+be.Name, "dbcanary / "+be.Title,
		be.Title+" canary ops against the documented baselines (baselines/*.yaml).", be.Name)
	bd.row("Health")
	bd.addStat(statPanel("Targets up", "dbcanary_target_up: 1 when the last op reached the store.", "none", steps("red", 0.0, "green", 1.0),
		query{m("dbcanary_target_up", be.Name), "{{target}}"}))
	bd.addStat(statPanel("Seconds since last success", fmt.Sprintf("Per op; DbcanaryCanaryStale fires above %s.", d.b.Policy.StaleAfter), "s",
		steps("orange", 60.0, "red", float64(d.b.Policy.StaleAfter)/1e9), query{fmt.Sprintf("time() - %s", m("dbcanary_last_success_timestamp_seconds", be.Name)), "{{target}} {{op}}"}))
	bd.addTimeseries(timeseriesPanel("Error ratio", "Failed ops / attempts over 5m.", "percentunit", steps("orange", round(1-d.b.Policy.SLOObjective), "red", d.b.Policy.ErrorRatioWarning),
		query{m(RecOpErrorRatio, be.Name), "{{target}} {{op}}"}))
	bd.addTimeseries(timeseriesPanel("Failures by cause", "Failures per second by cause over 5m; mismatch, lost and not_found are data integrity failures.", "ops", steps(),
		query{m(RecFailuresRate, be.Name), "{{target}} {{op}} {{cause}}"}))
	bd.addTimeseries(timeseriesPanel("Ops in flight", "Ops running now per target (bounded by max_in_flight; at the bound, new ops fail with cause backlog).", "none", steps(),
		query{m("dbcanary_op_in_flight", be.Name), "{{target}}"}))

	if be.Nodes {
		bd.row("Store nodes (as each target's driver sees them)")
		bd.addTimeline(nodesPanel(be))
	}

	bd.row("Latency per op (p50 / p90 / p99, lines at the baseline thresholds)")
	for _, p := range be.Panels {
		bd.addTimeseries(ownPanel(d, be, p))
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
			bd.addTimeseries(timeseriesPanel(title, fmt.Sprintf("p50 and p99 of each phase; lines at the %s thresholds. ", last)+strings.Join(notes, " "),
				"s", d.latencySteps(be.Name, op.Name, last),
				query{m(RecPhaseQuantile, be.Name, fmt.Sprintf(`op="%s"`, op.Name), `quantile=~"0.5|0.99"`), "{{target}} {{phase}} p{{quantile}}"}))
			continue
		}
		title := op.Title
		if title == "" {
			title = op.Name
		}
		bd.addTimeseries(timeseriesPanel(title, d.figureNote(be.Name, op.Name, ""), "s", d.latencySteps(be.Name, op.Name, ""),
			query{m(RecLatencyQuantile, be.Name, fmt.Sprintf(`op="%s"`, op.Name)), "{{target}} p{{quantile}}"}))
	}

	if be.hasOp(probes.OpLedgerCheck, "") {
		bd.row("Durability ledger (acknowledged writes re-read at ages)")
		bd.addStat(statPanel("Acknowledged writes missing or corrupted (24h)",
			"Ledger checks that found an acknowledged write gone or changed over the last day; DbcanaryDurabilityLoss pages on the first one. See docs/ledger.md.", "none",
			steps("green", 0.0, "red", 1.0),
			query{fmt.Sprintf(`sum by (target) (increase(%s[24h]))`, m("dbcanary_ledger_checks_total", be.Name, `result=~"missing|corrupted"`)), "{{target}}"}))
		bd.addTimeseries(timeseriesPanel("Ledger checks by age and result", "Checks per age (1m, 10m, 1h, ...) and result (intact, missing, corrupted) over the last hour.", "none", steps(),
			query{fmt.Sprintf(`sum by (target, age, result) (increase(%s[1h]))`, m("dbcanary_ledger_checks_total", be.Name)), "{{target}} {{age}} {{result}}"}))
		bd.addTimeseries(timeseriesPanel("Ledger entries held", "Acknowledged writes the ledger holds for re-reading (bounded by ledger.max_entries).", "none", steps(),
			query{m("dbcanary_ledger_entries", be.Name), "{{target}}"}))
		bd.addTimeseries(timeseriesPanel("Oldest ledger entry", "Age of the oldest acknowledged write still to be re-read: how far back the ledger reaches.", "s", steps(),
			query{m("dbcanary_ledger_oldest_entry_age_seconds", be.Name), "{{target}}"}))
	}

	bd.row("Throughput")
	bd.addTimeseries(timeseriesPanel("Ops per second", "By op and result over 5m.", "ops", steps(), query{m(RecOpsRate, be.Name), "{{target}} {{op}} {{result}}"}))
	bd.addTimeseries(timeseriesPanel("Payload bytes per second", "Sent and received payload bytes over 5m.", "Bps", steps(), query{m(RecBytesRate, be.Name), "{{target}} {{op}} {{direction}}"}))
	return bd.build()
}

// Dashboards builds the overview and one board per backend, by file name.
func Dashboards(b *baseline.File) (map[string]dashboard.Dashboard, error) {
	d, err := newBoardData(b)
	if err != nil {
		return nil, err
	}
	bes, err := backends()
	if err != nil {
		return nil, err
	}
	ov, err := overview(d, bes)
	if err != nil {
		return nil, fmt.Errorf("overview board: %w", err)
	}
	out := map[string]dashboard.Dashboard{"dbcanary-overview.json": ov}
	for _, be := range bes {
		if out["dbcanary-"+be.Name+".json"], err = backendBoard(d, be); err != nil {
			return nil, fmt.Errorf("%s board: %w", be.Name, err)
		}
	}
	return out, nil
}

// DashboardFiles renders every board as indented JSON (encoding/json; the
// SDK types carry their own JSON tags and marshalers), by file name under dashboards/.
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
