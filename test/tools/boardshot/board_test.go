package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func overviewPath(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "dashboards", "dbcanary-overview.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSubstitute(t *testing.T) {
	vals := map[string]string{"target": ".*", "cluster": "eu\\-1", "instance": ".+"}
	for _, c := range []struct{ in, want, err string }{
		{`up{target=~"$target"}`, `up{target=~".*"}`, ""},
		{`up{cluster=~"${cluster}",instance=~"${instance:regex}"}`, `up{cluster=~"eu\-1",instance=~".+"}`, ""},
		{`rate(x[5m]) / $target_count`, "", "unknown variable target_count"},
		{`up{a="$nope",b="${gone}"}`, "", "unknown variable nope, gone"},
		{`no variables at all`, `no variables at all`, ""},
	} {
		got, err := Substitute(c.in, vals)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Substitute(%q) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Substitute(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestVarValues(t *testing.T) {
	b, err := LoadBoard(overviewPath(t))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := b.VarValues(map[string]string{"target": "os.local"})
	if err != nil {
		t.Fatal(err)
	}
	// All values come from the board (instance's is .+); a set value is
	// regex-escaped inside a PromQL string, as Grafana does for a Prometheus
	// variable.
	want := map[string]string{"cluster": ".*", "vantage": ".*", "instance": ".+", "target": `os\\.local`}
	for k, v := range want {
		if vals[k] != v {
			t.Errorf("%s = %q, want %q", k, vals[k], v)
		}
	}
	if _, ok := vals["datasource"]; ok {
		t.Error("the datasource variable got a value; it names no label")
	}
	if _, err := b.VarValues(map[string]string{"tenant": "x"}); err == nil || !strings.Contains(err.Error(), `no variable "tenant"`) {
		t.Errorf("unknown -var: error %v, want one naming the variable", err)
	}
}

func TestLayout(t *testing.T) {
	// 1000 px: columns of (1000-23*8)/24 = 34 px with 8 px between them.
	for _, c := range []struct {
		g    GridPos
		want Box
	}{
		{GridPos{X: 0, Y: 0, W: 24, H: 1}, Box{Left: 0, Top: 0, Width: 1000, Height: 30}},
		{GridPos{X: 0, Y: 1, W: 4, H: 8}, Box{Left: 0, Top: 38, Width: 160, Height: 296}},
		{GridPos{X: 4, Y: 1, W: 8, H: 8}, Box{Left: 168, Top: 38, Width: 328, Height: 296}},
		{GridPos{X: 12, Y: 9, W: 12, H: 8}, Box{Left: 504, Top: 342, Width: 496, Height: 296}},
	} {
		if got := Layout(c.g, 1000); got != c.want {
			t.Errorf("Layout(%+v) = %+v, want %+v", c.g, got, c.want)
		}
	}
}

func TestVisiblePanelsCollapse(t *testing.T) {
	b, err := LoadBoard(overviewPath(t))
	if err != nil {
		t.Fatal(err)
	}
	all, err := visiblePanels(b.Panels, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 24 {
		t.Fatalf("%d panels and rows, want the overview's 24 (4 rows of 5 panels)", len(all))
	}
	ps, err := visiblePanels(b.Panels, map[string]bool{"OpenSearch": true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Type+":"+p.Title+"@"+strconv.Itoa(p.GridPos.Y))
	}
	// Cassandra collapses to its header; OpenSearch moves up under it, and
	// the collapsed RabbitMQ and S3 headers follow its panels.
	want := []string{"row:Cassandra@0", "row:OpenSearch@1", "stat:OpenSearch targets up@2",
		"timeseries:OpenSearch error ratio@2", "timeseries:OpenSearch p99 / baseline p99@2",
		"timeseries:OpenSearch p50 / p99 latency@10", "timeseries:OpenSearch throughput@10",
		"row:RabbitMQ@18", "row:S3@19"}
	if !slices.Equal(got, want) {
		t.Errorf("collapsed layout:\n got %v\nwant %v", got, want)
	}
	if _, err := visiblePanels(b.Panels, map[string]bool{"Kafka": true}); err == nil || !strings.Contains(err.Error(), `"Kafka"`) {
		t.Errorf("unknown row: error %v, want one naming it", err)
	}
}

func TestQueryStep(t *testing.T) {
	for _, c := range []struct {
		rng, min time.Duration
		px       int
		want     int64
	}{
		{15 * time.Minute, 15 * time.Second, 300, 15}, // 3 s a pixel: the scrape interval wins
		{6 * time.Hour, 15 * time.Second, 300, 72},    // 72 s a pixel
		{time.Hour, time.Second, 7, 515},              // rounded up to whole seconds
	} {
		if got := QueryStep(c.rng, c.min, c.px); got != c.want {
			t.Errorf("QueryStep(%s, %s, %d) = %d, want %d", c.rng, c.min, c.px, got, c.want)
		}
	}
}

func TestMakePlan(t *testing.T) {
	end := time.Date(2026, 12, 6, 2, 30, 0, 0, time.UTC)
	p, err := MakePlan(PlanOptions{Path: overviewPath(t), Width: 1000, End: end, Range: 15 * time.Minute, MinStep: 15 * time.Second,
		Vars: map[string]string{"target": "opensearch-local"}})
	if err != nil {
		t.Fatal(err)
	}
	var stat, series *PlanPanel
	for i := range p.Panels {
		switch p.Panels[i].Title {
		case "OpenSearch targets up":
			stat = &p.Panels[i]
		case "OpenSearch error ratio":
			series = &p.Panels[i]
		}
	}
	if stat == nil || series == nil {
		t.Fatalf("panels missing from the plan: %+v", p.Panels)
	}
	// The stat panel's query is instant; the time series' a range query
	// over the 15 minutes, every variable substituted.
	if q := stat.Queries[0]; !q.Instant || q.End != end.Unix() {
		t.Errorf("stat query %+v: want instant at the end", q)
	}
	q := series.Queries[0]
	wantExpr := `target_op:dbcanary_op_errors:ratio_rate5m{backend="opensearch",cluster=~".*",vantage=~".*",target=~"opensearch-local"}`
	if q.Instant || q.Expr != wantExpr || q.Start != end.Add(-15*time.Minute).Unix() || q.Step != 15 || q.Legend != "{{target}} {{op}}" {
		t.Errorf("range query %+v\nwant expr %s, start %d, step 15", q, wantExpr, end.Add(-15*time.Minute).Unix())
	}
	if series.Unit != "percentunit" || series.Thresholds != "line+area" || len(series.Steps) != 3 {
		t.Errorf("display settings %+v: want the board's percentunit and three threshold steps drawn as line+area", series)
	}
	if !p.Exprs()[wantExpr] || p.Exprs()["up"] {
		t.Error("Exprs: the proxy's allow-list is not the plan's queries")
	}
	if p.Height != 68*38-8 {
		t.Errorf("height %d, want the board's 68 grid rows (%d px)", p.Height, 68*38-8)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:9090", "http://localhost:9090", "http://[::1]:9090/"} {
		if _, err := loopbackURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1:9090", "http://prometheus:9090", "ftp://127.0.0.1/", "127.0.0.1:9090"} {
		if _, err := loopbackURL(u); err == nil {
			t.Errorf("%s: accepted, want refused", u)
		}
	}
	if _, err := listenLoopback("0.0.0.0:0"); err == nil {
		t.Error("listen on 0.0.0.0 accepted")
	}
}

func TestProxyForwardsOnlyThePlansQueries(t *testing.T) {
	var got []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+"?"+r.URL.RawQuery)
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
	}))
	defer prom.Close()
	u, err := loopbackURL(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	plan := &Plan{Panels: []PlanPanel{{Queries: []Query{{Expr: `up{target=~".*"}`}}}}}
	h := newServer(plan, u, t.TempDir()).handler()
	for _, c := range []struct {
		path string
		want int
	}{
		{"/api/v1/query_range?" + url.Values{"query": {`up{target=~".*"}`}, "start": {"1"}, "end": {"2"}, "step": {"15"}}.Encode(), http.StatusOK},
		{"/api/v1/query?" + url.Values{"query": {`up{target=~".*"}`}, "time": {"2"}}.Encode(), http.StatusOK},
		{"/api/v1/query?" + url.Values{"query": {`up`}}.Encode(), http.StatusForbidden},
		{"/api/v1/series?match[]=up", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != c.want {
			t.Errorf("GET %s: %d, want %d", c.path, rec.Code, c.want)
		}
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "/api/v1/query_range?") || !strings.HasPrefix(got[1], "/api/v1/query?") {
		t.Errorf("Prometheus got %q, want the two allowed queries", got)
	}
}
