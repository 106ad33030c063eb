// Command boardshot draws one of the shipped Grafana boards (dashboards/*.json)
// from a real Prometheus and screenshots it in headless Chromium: it
// substitutes the board's template variables, places every panel by its own
// gridPos, and serves a page (uPlot, test/tools/uplot.sh) that runs every
// panel's PromQL through boardshot's loopback proxy to Prometheus's
// /api/v1/query_range (/api/v1/query for instant stat queries). A panel whose
// queries return nothing says "no data". It is not Grafana: Grafana is AGPL
// and not used in this project's tests.
//
//	go run ./test/tools/boardshot -board dashboards/dbcanary-overview.json \
//	  -prometheus http://127.0.0.1:19090 -range 15m -out /tmp/board.png \
//	  -uplot "$(bash test/tools/uplot.sh path)" -chromium "$(bash test/tools/chromium.sh path)"
//
// `make board-picture` runs the whole picture (a real Prometheus scraping a
// real daemon, test/tools/boardshot/picture_test.go) and writes docs/board-overview.png.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == nil {
		var rs []PanelReport
		rs, err = Shoot(o)
		fmt.Fprint(os.Stderr, summary(rs))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "boardshot:", err)
		os.Exit(1)
	}
}

// Options are one picture's settings.
type Options struct {
	Plan       PlanOptions
	Prometheus string
	Out        string
	Listen     string
	Chromium   string
	UPlot      string
	Note       string // a line under the title: what the reader is looking at
}

// varFlags collects repeated -var name=value flags.
type varFlags map[string]string

func (v varFlags) String() string { return fmt.Sprint(map[string]string(v)) }
func (v varFlags) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	v[name] = val
	return nil
}

func parseFlags(args []string) (Options, error) {
	fs := flag.NewFlagSet("boardshot", flag.ContinueOnError)
	o := Options{Plan: PlanOptions{Vars: varFlags{}}}
	fs.StringVar(&o.Plan.Path, "board", "", "the board JSON file (dashboards/*.json)")
	fs.StringVar(&o.Prometheus, "prometheus", "", "Prometheus on this machine, http://127.0.0.1:PORT")
	fs.StringVar(&o.Out, "out", "", "the PNG to write")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:0", "where the page is served (loopback only)")
	fs.StringVar(&o.Chromium, "chromium", "/usr/bin/chromium", "headless Chromium (test/tools/chromium.sh path)")
	fs.StringVar(&o.UPlot, "uplot", "", "uPlot's dist directory (test/tools/uplot.sh path)")
	fs.StringVar(&o.Note, "note", "", "a line printed under the board's title")
	fs.IntVar(&o.Plan.Width, "width", 1200, "page width in CSS pixels")
	fs.DurationVar(&o.Plan.Range, "range", time.Hour, "time range drawn, ending at -end")
	fs.DurationVar(&o.Plan.MinStep, "min-step", 15*time.Second, "the finest query step (the scrape interval)")
	open := fs.String("open", "", "comma-separated row titles drawn open; the other rows are drawn collapsed (default: as the board has them)")
	end := fs.String("end", "", "end of the time range, RFC 3339 (default: now)")
	fs.Var(varFlags(o.Plan.Vars), "var", "name=value for a template variable (repeatable; default: its All value)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for name, v := range map[string]string{"-board": o.Plan.Path, "-prometheus": o.Prometheus, "-out": o.Out, "-uplot": o.UPlot} {
		if v == "" {
			return o, fmt.Errorf("%s is required", name)
		}
	}
	if *open != "" {
		o.Plan.Open = map[string]bool{}
		for _, r := range strings.Split(*open, ",") {
			o.Plan.Open[strings.TrimSpace(r)] = true
		}
	}
	o.Plan.End = time.Now()
	if *end != "" {
		t, err := time.Parse(time.RFC3339, *end)
		if err != nil {
			return o, fmt.Errorf("-end %q: %v", *end, err)
		}
		o.Plan.End = t
	}
	return o, nil
}
