package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dbcanary/dbcanary/internal/hist"
)

// Report is a bench run: what ran, every stage's figures, and the tables
// the reference documents print, each figure beside its reference.
type Report struct {
	Profile     string    `json:"profile"`
	Description string    `json:"description"`
	Target      string    `json:"target"`
	Backend     string    `json:"backend"`
	Namespace   string    `json:"namespace,omitempty"`
	Instance    string    `json:"instance"`
	Version     string    `json:"version"`
	Host        string    `json:"host"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Params      []Param   `json:"params"`
	// Shard is set when the run was one driver of several (--shard i/N).
	Shard *Shard `json:"shard,omitempty"`
	// Drivers are the merged reports' own rows (`dbcanary bench merge`).
	Drivers []Driver `json:"drivers,omitempty"`
	// Verified says what every read was checked against.
	Verified string        `json:"verified"`
	Stages   []StageReport `json:"stages"`
	Tables   []Table       `json:"tables"`
	Notes    []string      `json:"notes,omitempty"`
	// Failed counts failed ops over every measured stage.
	Failed uint64 `json:"failed"`
	// Reproduces names the reference run and the document it comes from.
	Reproduces string `json:"reproduces,omitempty"`
	// PeakRSSBytes is dbcanary's peak resident set size over the whole run
	// (getrusage ru_maxrss; 0 where the system does not say); in a merged
	// report, the largest driver's.
	PeakRSSBytes int64 `json:"peak_rss_bytes,omitempty"`
}

// Param is one setting of the run.
type Param struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// StageReport is one measured stage.
type StageReport struct {
	Name    string  `json:"name"`
	Group   string  `json:"group,omitempty"`
	Setup   bool    `json:"setup,omitempty"`
	Mode    string  `json:"mode"`
	Workers int     `json:"workers"`
	Rate    float64 `json:"rate,omitempty"`
	Seconds float64 `json:"seconds"`
	Issued  int64   `json:"issued"`
	// Step is the width of a plot interval, in seconds.
	Step float64 `json:"step_seconds"`
	// Started and Ended bound the measured window (merged: the common window
	// of the drivers, where they all ran).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	// Overall and Throughput are over every op of the stage (successes / s).
	Overall     Summary       `json:"overall_latency_ms"`
	OverallHist hist.Snapshot `json:"overall_latency_histogram"`
	Throughput  float64       `json:"throughput_ops_per_s"`
	// Concurrency is over every scheduled op of the stage.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Ops         []OpReport   `json:"ops"`
}

// Op returns the stage's figures of op (nil when it has none).
func (s *StageReport) Op(name string) *OpReport {
	for i := range s.Ops {
		if s.Ops[i].Op == name {
			return &s.Ops[i]
		}
	}
	return nil
}

// OpReport is one op's figures in a stage. Times are in milliseconds.
type OpReport struct {
	Op            string             `json:"op"`
	Count         uint64             `json:"count"`
	OK            uint64             `json:"ok"`
	Failed        uint64             `json:"failed"`
	Causes        map[string]uint64  `json:"causes,omitempty"`
	ErrorRate     float64            `json:"error_rate"`
	Throughput    float64            `json:"throughput_ops_per_s"`
	MiBps         float64            `json:"mib_per_s"`
	BytesSent     int64              `json:"bytes_sent"`
	BytesReceived int64              `json:"bytes_received"`
	Latency       Summary            `json:"latency_ms"`
	Service       Summary            `json:"service_time_ms"`
	Phases        map[string]Summary `json:"phases_ms,omitempty"`
	// Histograms are the raw buckets behind Latency, Service and Phases:
	// `dbcanary bench merge` adds them bucket by bucket.
	Histograms OpHistograms `json:"histograms"`
	// Concurrency is nil for an event-driven op (no worker runs it).
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Series      []Point      `json:"series"`
}

// OpHistograms are an op's latency (from the slot), service time (from the
// call) and phase histograms, as raw buckets.
type OpHistograms struct {
	Latency hist.Snapshot            `json:"latency"`
	Service hist.Snapshot            `json:"service_time"`
	Phases  map[string]hist.Snapshot `json:"phases,omitempty"`
}

// Summary is a latency distribution in milliseconds.
type Summary struct {
	Count uint64  `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P25   float64 `json:"p25"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

// Point is one plot interval ending at T seconds into the stage, with its
// ok and failed ops and the raw latency buckets of both.
type Point struct {
	T            float64        `json:"t"`
	OK           uint64         `json:"ok"`
	Failed       uint64         `json:"failed"`
	Latency      *hist.Snapshot `json:"latency_histogram,omitempty"`
	OpsPerSec    float64        `json:"ops_per_s"`
	ErrorsPerSec float64        `json:"errors_per_s"`
	P50          float64        `json:"p50_ms"`
	P99          float64        `json:"p99_ms"`
	Max          float64        `json:"max_ms"`
}

// Table is one table as printed; Verdicts, when set, holds a row's verdict
// class (within, beyond, below, "") for the HTML colouring.
type Table struct {
	ID     string     `json:"id"`
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
	Notes  []string   `json:"notes,omitempty"`
	// RightAlign marks numeric columns.
	RightAlign []bool `json:"-"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the tables as the reference documents print them.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "dbcanary bench --profile %s: %s\n", r.Profile, r.Description)
	fmt.Fprintf(&b, "target %s (%s), %s; dbcanary %s on %s, %s\n", r.Target, r.Backend, r.Namespace, r.Version, r.Host, r.Started.UTC().Format("2006-01-02 15:04:05 UTC"))
	if r.Shard != nil {
		fmt.Fprintf(&b, "%s\n", r.Shard.Describe())
	}
	var ps []string
	for _, p := range r.Params {
		ps = append(ps, p.Name+"="+p.Value)
	}
	fmt.Fprintf(&b, "%s\n%s\n", strings.Join(ps, " "), r.Verified)
	if r.Reproduces != "" {
		fmt.Fprintf(&b, "Reproduces: %s\n", r.Reproduces)
	}
	if r.PeakRSSBytes > 0 {
		fmt.Fprintf(&b, "Peak RSS of dbcanary: %.1f MiB\n", float64(r.PeakRSSBytes)/(1<<20))
	}
	for _, t := range r.Tables {
		b.WriteString("\n")
		t.writeText(&b)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t Table) writeText(b *strings.Builder) {
	widths := make([]int, len(t.Header))
	for i, h := range t.Header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, row := range t.Rows {
		for i, c := range row {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	line := func(cells []string) {
		b.WriteString("|")
		for i, w := range widths {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", w-utf8.RuneCountInString(c))
			if i < len(t.RightAlign) && t.RightAlign[i] {
				fmt.Fprintf(b, " %s%s |", pad, c)
			} else {
				fmt.Fprintf(b, " %s%s |", c, pad)
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "%s\n", t.Title)
	line(t.Header)
	b.WriteString("|")
	for _, w := range widths {
		b.WriteString(strings.Repeat("-", w+2) + "|")
	}
	b.WriteString("\n")
	for _, row := range t.Rows {
		line(row)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(b, "  %s\n", n)
	}
}

// num formats a figure: two decimals from 100 up, three below, four
// significant digits under 1 (as opensearch-benchmark prints them).
func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// ratio formats measured / reference as 0.42x.
func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 0, 64) + "x"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "x"
}
