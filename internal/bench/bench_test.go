package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/all"
)

func parse(t *testing.T, y string) *config.Config {
	t.Helper()
	t.Setenv("PW", "x")
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// noopProfile drives the noop probe through every path of Run: a setup
// stage, a closed-loop stage with a warm-up and an open-loop stage.
func noopProfile() *Profile {
	return &Profile{Backend: "noop", BenchProfile: probes.BenchProfile{Name: "noop-test", Description: "test", Sources: []string{"s"},
		Defaults: func(p *Params) { p.Workers = cmp.Or(p.Workers, 2) },
		Stages: func(p Params) []probes.BenchStage {
			mix := []probes.Weighted{{Op: "noop", Weight: 1}}
			return []probes.BenchStage{
				{Name: "setup", Setup: true, Mix: mix, Workers: 1, MaxOps: 10},
				{Name: "closed", Mix: mix, Workers: p.Workers, Duration: 1500 * time.Millisecond, Warmup: 200 * time.Millisecond},
				{Name: "open", Mix: mix, Workers: 1, Rate: 100, Duration: 1200 * time.Millisecond},
			}
		},
		Tables: func(Params) []probes.BenchTable {
			return []probes.BenchTable{{Layout: probes.LayoutSummary}, {Layout: probes.LayoutStress}}
		},
	}}
}

const refFile = `
factors: {warning: 1.0, critical: 3.0}
snap_tolerance: 0.05
policy: {slo_objective: 0.999, error_ratio_warning: 0.05, stale_after: 5m, drift_factor: 2, drift_min_seconds: 0.005, job: dbcanary}
sources: [{id: s, document: d, conditions: c}]
figures:
  - {id: p50, backend: noop, ops: [noop], kind: latency, stat: p50, value: 1, unit: s, quoted: "1 s", source: s, conditions: c, use: reference}
  - {id: p99, backend: noop, ops: [noop], kind: latency, stat: p99, value: 1, unit: us, quoted: "1 us", source: s, conditions: c, use: reference}
  - {id: rate, backend: noop, ops: [noop], kind: throughput, stat: rate, value: 50, unit: ops/s, quoted: "50/s", source: s, conditions: c, use: reference}
`

func TestRunReport(t *testing.T) {
	cfg := parse(t, "global: {instance_id: b}\ntargets:\n  - {name: n, backend: noop, noop: {delay: 1ms}}\n")
	b, err := baseline.Parse([]byte(refFile))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	r, err := Run(context.Background(), Options{Profile: noopProfile(), Config: cfg, Baseline: b, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Progress: func(l string, _ bool) { lines = append(lines, l) }, Version: "test", Host: "h", Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stages) != 3 || r.Stages[0].Issued != 10 || r.Failed != 0 {
		t.Fatalf("stages %+v failed %d", r.Stages, r.Failed)
	}
	open := r.Stages[2].Op("noop")
	if open == nil || open.Count != 120 || open.Throughput <= 0 || open.Throughput > 101 || len(open.Series) < 2 {
		t.Fatalf("open loop at 100/s for 1.2s: %+v", open)
	}
	if !anyMatch(lines, regexp.MustCompile(`^\[noop-test\] 2/3 closed  [0-9.]+s/1.5s  [0-9]+ ops/s  p50 [0-9.]+(ms|µs)  p99 [0-9.]+(ms|µs)  errors 0$`)) {
		t.Errorf("no progress line for the closed stage in:\n%s", strings.Join(lines, "\n"))
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	// Each figure beside its reference: p50 of ~1 ms is within 1 s, p99 beyond
	// 1 µs, and the open stage's rate beside 50 ops/s (100 ops/s are issued; a
	// loaded machine may measure less, so the verdict is not asserted).
	for _, re := range []string{
		`\| +50th percentile latency \| +open \| +[0-9.]+ \| +ms \| +1000.00 \| +0\.[0-9]+x \| within +\|`,
		`\| +99th percentile latency \| +open \| +[0-9.]+ \| +ms \| +0.001 \| +[0-9]+x \| beyond +\|`,
		`\| +Mean Throughput \| +open \| +[0-9]+\.[0-9]+ \| +ops/s \| +50 \| +[0-9]+\.[0-9]+x \| (within|beyond) +\|`,
		`\| closed +\| noop +\| +[0-9.]+ \|`,
	} {
		if !regexp.MustCompile(re).MatchString(text.String()) {
			t.Errorf("text report lacks %s:\n%s", re, text.String())
		}
	}
	if strings.Contains(text.String(), "setup") {
		t.Errorf("setup stage compared:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Stages) != 3 || len(back.Stages[2].Ops[0].Series) == 0 {
		t.Fatalf("JSON does not round-trip: %v", err)
	}
	var page bytes.Buffer
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	h := page.String()
	plots := regexp.MustCompile(`<svg class="plot" data-kind="(latency|throughput)" data-points="([0-9]+)"`).FindAllStringSubmatch(h, -1)
	if len(plots) != 6 {
		t.Fatalf("%d plots, want latency and throughput for 3 stages", len(plots))
	}
	for _, p := range plots {
		if n, _ := strconv.Atoi(p[2]); n == 0 {
			t.Errorf("a %s plot has no data", p[1])
		}
	}
	for _, bad := range []string{"<script", "http://", "https://", "<link", "@import", "url("} {
		if strings.Contains(strings.ReplaceAll(h, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("the page is not self-contained: it holds %q", bad)
		}
	}
}

func mustProfile(t *testing.T, name string) *Profile {
	t.Helper()
	p, ok := ProfileByName(name)
	if !ok {
		t.Fatalf("no profile %s", name)
	}
	return p
}

// profileOf is the first profile of a backend.
func profileOf(t *testing.T, backend string) *Profile {
	t.Helper()
	for _, p := range Profiles() {
		if p.Backend == backend {
			return p
		}
	}
	t.Fatalf("no profile of %s", backend)
	return nil
}

func anyMatch(lines []string, re *regexp.Regexp) bool {
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// A target that is not loopback is refused without --yes, before any I/O.
func TestRefusesRemoteTargets(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`{name: mq, backend: rabbitmq, rabbitmq: {url: "amqp://10.1.2.3:5672/", username: u, password_env: PW}}`, "target mq: host 10.1.2.3 (10.1.2.3) is not a loopback address"},
		{`{name: mq2, backend: rabbitmq, rabbitmq: {urls: ["amqp://127.0.0.1:5672/", "amqp://10.1.2.4:5672/"], username: u, password_env: PW}}`, "target mq2: host 10.1.2.4 (10.1.2.4) is not a loopback address"},
		{`{name: c, backend: cassandra, cassandra: {hosts: ["127.0.0.1", "192.0.2.7:9042"], username: u, password_env: PW}}`, "target c: host 192.0.2.7 (192.0.2.7) is not a loopback address"},
		{`{name: o, backend: opensearch, opensearch: {addresses: ["https://[::1]:9200", "http://198.51.100.1:9200"]}}`, "target o: host 198.51.100.1 (198.51.100.1) is not a loopback address"},
		{`{name: s, backend: s3, s3: {endpoint: "s3.example.invalid:443", access_key_id_env: PW, secret_access_key_env: PW}}`, "target s: host s3.example.invalid does not resolve"},
	} {
		cfg := parse(t, "targets:\n  - "+tc.yaml+"\n")
		prof := profileOf(t, cfg.Targets[0].Backend)
		_, err := Run(context.Background(), Options{Profile: prof, Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), "pass --yes") {
			t.Errorf("error %v, want %q ... pass --yes", err, tc.want)
		}
		if !strings.Contains(tc.want, "resolve") && !errors.Is(err, ErrNotLoopback) {
			t.Errorf("%v is not ErrNotLoopback", err)
		}
	}
	local := parse(t, "targets:\n  - {name: mq, backend: rabbitmq, rabbitmq: {url: \"amqp://localhost:5672/\", username: u, password_env: PW}}\n")
	if err := checkLoopback(local.Targets[0]); err != nil {
		t.Errorf("localhost refused: %v", err)
	}
}

func TestParseMix(t *testing.T) {
	mix, err := ParseMix("insert=1, read=4")
	if err != nil || len(mix) != 2 || mix[1] != (probes.Weighted{Op: "read", Weight: 4}) {
		t.Fatalf("%v %v", mix, err)
	}
	for _, bad := range []string{"read", "read=0", "=3", "read=x"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q): no error", bad)
		}
	}
}

// opensearch-pmc searches at 20 ops/s unless --rate 0 asks for a closed loop;
// s3-sizes takes op kinds in --mix and names its stages after them.
func TestProfileParams(t *testing.T) {
	var p Params
	pmc := mustProfile(t, "opensearch-pmc")
	pmc.defaults(&p)
	q := Params{ClosedLoop: true}
	pmc.defaults(&q)
	if p.Rate != 20 || q.Rate != 0 {
		t.Errorf("rates %g and %g, want 20 and 0", p.Rate, q.Rate)
	}
	s := Params{Mix: []probes.Weighted{{Op: "put", Weight: 1}}, Values: map[string]string{"worker-steps": "4"}}
	prof := mustProfile(t, "s3-sizes")
	prof.defaults(&s)
	st := prof.stages(s)
	if len(st) != 8 || st[1].Name != "put 4KiB x4" || st[1].Mix[0].Op != "put_4KiB" || st[7].Mix[0].Op != "put_8MiB" || st[0].MaxOps != 6 {
		t.Errorf("stages %+v", st)
	}
	// --param objects=32 (warp's --objects): 32 uploads first.
	s = Params{Values: map[string]string{"worker-steps": "8", "objects": "32"}}
	prof.defaults(&s)
	if st := prof.stages(s); st[0].MaxOps != 32 {
		t.Errorf("objects=32: the upload stage makes %d objects", st[0].MaxOps)
	}
}

// The floor profile needs no store: without a noop target in the config it
// runs one of its own, and its table sets latency beside service time.
func TestFloorProfile(t *testing.T) {
	cfg := parse(t, "targets:\n  - {name: mq, backend: rabbitmq, rabbitmq: {url: \"amqp://127.0.0.1:5672/\", username: u, password_env: PW}}\n")
	prof := mustProfile(t, "floor")
	r, err := Run(context.Background(), Options{Profile: prof, Params: Params{Duration: 500 * time.Millisecond, Rate: 40}, Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	_ = r.WriteText(&text)
	if r.Target != "floor" || !regexp.MustCompile(`\| floor \| +20 \| latency - service \| +[0-9]+ \|`).MatchString(text.String()) {
		t.Fatalf("target %s:\n%s", r.Target, text.String())
	}
}

// An open-loop stage runs on the scheduler (scheduler.RunAhead) and ends at
// its duration or op count: its k-th op at exactly k/rate (at 300/s a 3.33 ms
// interval rounded to whole ns would fit a 31st op in 100 ms), none dropped.
func TestOpenLoopStageEnds(t *testing.T) {
	cfg := parse(t, "targets: []\n")
	noWarmup := time.Duration(0)
	for _, tc := range []struct {
		p    Params
		want int64
	}{
		{Params{Duration: 100 * time.Millisecond, Rate: 300, Warmup: &noWarmup}, 30},
		{Params{Duration: 10 * time.Second, Ops: 25, Rate: 1000, Warmup: &noWarmup}, 25},
	} {
		r, err := Run(context.Background(), Options{Profile: mustProfile(t, "floor"), Params: tc.p, Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		st := r.Stages[len(r.Stages)-1]
		if st.Issued != tc.want || len(st.Ops) != 1 || st.Ops[0].Count != uint64(tc.want) || r.Failed != 0 {
			t.Errorf("%+v: issued %d, ops %+v, failed %d; want %d issued and recorded", tc.p, st.Issued, st.Ops, r.Failed, tc.want)
		}
	}
}

// The table layouts read the ops and phases the profile names: s3-sizes'
// download table and rabbitmq-perftest's PerfTest table, on a synthetic report.
func TestProfileTables(t *testing.T) {
	r := &Report{Backend: "s3", Stages: []StageReport{
		{Name: "upload 4KiB", Group: "4KiB", Setup: true, Workers: 8, Seconds: 1, Ops: []OpReport{{Op: "put_4KiB", OK: 10}}},
		{Name: "get 4KiB x8", Group: "4KiB", Workers: 8, Seconds: 1, Ops: []OpReport{{Op: "get_4KiB", OK: 5, MiBps: 1.5,
			Phases: map[string]Summary{"first_byte": {P50: 2}, "last_byte": {P50: 3}}}}},
	}}
	prof := mustProfile(t, "s3-sizes")
	p := Params{Values: map[string]string{"sizes": "4KiB"}}
	prof.defaults(&p)
	tabs := tables(r, refs{}, prof.Tables(p))
	if len(tabs) != 2 || tabs[0].ID != "s3-4KiB" || tabs[0].Title != "Download performance with 4KiB objects" || tabs[1].ID != "summary" {
		t.Fatalf("tables %+v", tabs)
	}
	if n := tabs[0].Notes; len(n) != 2 || !strings.HasPrefix(n[0], "Setup: uploaded 10 4KiB objects with 8 threads") || !strings.HasPrefix(n[1], "Reference: the documented range") {
		t.Errorf("notes %q", n)
	}
	if row := tabs[0].Rows[0]; row[0] != "8" || row[1] != "1.5 MB/s" || row[5] != "2.0" || row[13] != "3.0" {
		t.Errorf("row %q", row)
	}

	r = &Report{Backend: "rabbitmq", Stages: []StageReport{{Name: "perftest", Ops: []OpReport{{Op: "publish", OK: 7}, {Op: "consume", OK: 6}}}}}
	prof = mustProfile(t, "rabbitmq-perftest")
	tabs = tables(r, refs{}, prof.Tables(Params{}))
	if len(tabs) != 2 || tabs[0].ID != "perftest" || len(tabs[0].Rows) != 6 || tabs[0].Rows[3][2] != "7 / 0" || tabs[0].Rows[5][2] != "6 / 0 (0)" {
		t.Fatalf("perftest table %+v", tabs[0])
	}
}

// A profile's own parameters: only the ones it declares, with values its
// Check accepts.
func TestSetParams(t *testing.T) {
	prof := mustProfile(t, "s3-sizes")
	var p Params
	if err := prof.SetParams(&p, []string{"sizes=4KiB,1MiB", "worker-steps=2..3"}); err != nil {
		t.Fatal(err)
	}
	prof.defaults(&p)
	if p.Values["sizes"] != "4KiB,1MiB" || p.Workers != 3 || p.Values["objects"] != "5" {
		t.Errorf("values %v, workers %d (want objects defaulting to the most workers + 2)", p.Values, p.Workers)
	}
	for arg, want := range map[string]string{
		"bulk-size=5":    "bulk-size: profile s3-sizes has no such parameter (it has sizes, worker-steps, objects)",
		"sizes=0B":       `sizes: "0B" is not an object size (4KiB, 1MiB) listed once`,
		"worker-steps=9": "",
		"objects=32":     "",
		"objects=101":    `objects: "101" is not a whole number from 1 to 100`,
		"sizes":          `"sizes": want name=value`,
	} {
		if err := prof.SetParams(&Params{}, []string{arg}); fmt.Sprint(err) != want && (want != "" || err != nil) {
			t.Errorf("%s: %v, want %s", arg, err, want)
		}
	}
}
