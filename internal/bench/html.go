package bench

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteHTML writes a self-contained page: the tables, then latency over time
// and throughput over time for every op of every stage, as inline SVG. It
// loads nothing from anywhere (no script, font, image or stylesheet link).
func (r *Report) WriteHTML(w io.Writer) error {
	type chartPair struct{ Op, Latency, Throughput template.HTML }
	type stageView struct {
		StageReport
		Charts []chartPair
	}
	var stages []stageView
	for _, s := range r.Stages {
		sv := stageView{StageReport: s}
		for _, o := range s.Ops {
			var p50, p99, mx, ok, bad [][2]float64
			for _, p := range o.Series {
				p50 = append(p50, [2]float64{p.T, p.P50})
				p99 = append(p99, [2]float64{p.T, p.P99})
				mx = append(mx, [2]float64{p.T, p.Max})
				ok = append(ok, [2]float64{p.T, p.OpsPerSec})
				bad = append(bad, [2]float64{p.T, p.ErrorsPerSec})
			}
			sv.Charts = append(sv.Charts, chartPair{Op: template.HTML(html.EscapeString(o.Op)),
				Latency: svgChart(fmt.Sprintf("%s %s: latency over time", s.Name, o.Op), "ms", "latency", []line{
					{"max", "#c9c9c9", mx}, {"p99", "#d9480f", p99}, {"p50", "#1864ab", p50}}),
				Throughput: svgChart(fmt.Sprintf("%s %s: throughput over time", s.Name, o.Op), "ops/s", "throughput", []line{
					{"ok ops/s", "#2b8a3e", ok}, {"failed ops/s", "#c92a2a", bad}}),
			})
		}
		stages = append(stages, sv)
	}
	return pageTemplate.Execute(w, map[string]any{"R": r, "Stages": stages})
}

// verdictClass colours a verdict cell.
func verdictClass(cell string) string {
	switch {
	case cell == VerdictWithin:
		return "within"
	case strings.HasPrefix(cell, VerdictBeyond), strings.HasPrefix(cell, VerdictBelow), strings.Contains(cell, " beyond "), strings.Contains(cell, " below "):
		return "beyond"
	}
	return ""
}

type line struct {
	name, color string
	pts         [][2]float64
}

// svgChart draws lines over time on linear axes starting at zero. The svg
// carries data-points (how many points it drew) for tests.
func svgChart(title, unit, kind string, lines []line) template.HTML {
	const w, h, left, right, top, bottom = 560, 220, 58, 12, 26, 34
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	xmax, ymax, n := 0.0, 0.0, 0
	for _, l := range lines {
		for _, p := range l.pts {
			xmax, ymax = math.Max(xmax, p[0]), math.Max(ymax, p[1])
			n++
		}
	}
	xmax, ymax = niceCeil(math.Max(xmax, 1)), niceCeil(math.Max(ymax, 1e-3))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" data-kind="%s" data-points="%d" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		kind, n, w, h, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%d" y="16" class="t">%s</text>`, left, html.EscapeString(title))
	for i := 0; i <= 4; i++ {
		y := float64(top) + ph - ph*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="g"/><text x="%d" y="%.1f" class="a" text-anchor="end">%s</text>`,
			left, y, w-right, y, left-6, y+4, tick(ymax*float64(i)/4))
		x := float64(left) + pw*float64(i)/4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="a" text-anchor="middle">%ss</text>`, x, h-bottom+16, tick(xmax*float64(i)/4))
	}
	fmt.Fprintf(&b, `<text x="12" y="%d" class="a" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>`, top+int(ph/2), top+int(ph/2), unit)
	for i, l := range lines {
		if len(l.pts) == 0 {
			continue
		}
		var pts []string
		for _, p := range l.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", float64(left)+pw*p[0]/xmax, float64(top)+ph-ph*p[1]/ymax))
		}
		if len(pts) == 1 {
			xy := strings.Split(pts[0], ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`, xy[0], xy[1], l.color)
		} else {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, l.color, strings.Join(pts, " "))
		}
		lx := left + 8 + i*110
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d" class="a">%s</text>`,
			lx, h-10, l.color, lx+14, h-6, html.EscapeString(l.name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil rounds up to 1, 2 or 5 × a power of ten.
func niceCeil(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*e*1.0000001 {
			return m * e
		}
	}
	return 10 * e
}

func tick(v float64) string {
	if v == 0 {
		return "0"
	}
	if math.Abs(v) >= 10 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"verdict": verdictClass,
	"right":   func(t Table, i int) bool { return i < len(t.RightAlign) && t.RightAlign[i] },
	"utc":     func(r *Report) string { return r.Started.UTC().Format("2006-01-02 15:04:05 UTC") },
	"secs":    func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"mib":     func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB" },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dbcanary bench {{.R.Profile}}: {{.R.Target}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2125;background:#f6f7f9}
header{background:#1d2b3a;color:#fff;padding:14px 24px}header h1{font-size:20px;margin:0 0 4px}
header p{margin:2px 0;color:#c8d2dc}main{padding:8px 24px 40px}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;margin:16px 0;padding:12px 16px;overflow-x:auto}
h2{font-size:16px;margin:4px 0 10px}h3{font-size:14px;margin:14px 0 6px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:13px}
th,td{border-bottom:1px solid #e9ecef;padding:3px 9px;text-align:left;white-space:nowrap}
th{background:#f1f3f5}td.r,th.r{text-align:right}
td.within{background:#d3f9d8;color:#1b5e20}td.beyond{background:#ffe3e3;color:#a61e1e}
.notes{color:#495057;font-size:12.5px;margin:6px 0 0;padding-left:18px}
.charts{display:flex;flex-wrap:wrap;gap:10px}
svg.plot{background:#fff;border:1px solid #e9ecef;border-radius:4px}
svg .t{font-size:12.5px;font-weight:600;fill:#1d2125}svg .a{font-size:11px;fill:#495057}svg .g{stroke:#eef0f2}
.params code{background:#eef1f4;padding:1px 5px;border-radius:3px;margin-right:4px}
</style></head><body>
<header><h1>dbcanary bench --profile {{.R.Profile}}</h1>
<p>{{.R.Description}}</p>
<p>target <b>{{.R.Target}}</b> ({{.R.Backend}}), {{.R.Namespace}} · dbcanary {{.R.Version}} on {{.R.Host}} · {{utc .R}}</p></header>
<main>
<section class="params"><h2>Run</h2>
<p>{{range .R.Params}}<code>{{.Name}}={{.Value}}</code>{{end}}</p>
<p>{{.R.Verified}}</p>
<p>Failed ops in measured stages: <b id="failed">{{.R.Failed}}</b></p>
{{with .R.Reproduces}}<p>Reproduces: {{.}}</p>{{end}}
{{with .R.PeakRSSBytes}}<p>Peak RSS of dbcanary: <b id="peak-rss">{{mib .}}</b></p>{{end}}
{{with .R.Shard}}<p id="shard">{{.Describe}}</p>{{end}}
{{with .R.Notes}}<ul class="notes">{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
</section>
{{range $t := .R.Tables}}<section class="table" id="table-{{$t.ID}}"><h2>{{$t.Title}}</h2>
<table><thead><tr>{{range $i, $h := $t.Header}}<th{{if right $t $i}} class="r"{{end}}>{{$h}}</th>{{end}}</tr></thead><tbody>
{{range $row := $t.Rows}}<tr>{{range $i, $c := $row}}<td class="{{if right $t $i}}r {{end}}{{verdict $c}}">{{$c}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{with $t.Notes}}<ul class="notes">{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
</section>
{{end}}
{{range .Stages}}<section class="stage"><h2>Stage {{.Name}}</h2>
<p>{{.Mode}}; measured {{secs .Seconds}} s, {{.Issued}} ops issued</p>
{{range .Charts}}<h3>{{.Op}}</h3><div class="charts">{{.Latency}}{{.Throughput}}</div>{{end}}
</section>
{{end}}
</main></body></html>
`))
