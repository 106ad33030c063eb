//go:build linux

package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// BenchmarkFleet runs the real daemon (built from this tree) with 1,000 noop
// targets at 1 op/s each, once per histogram layout, and prints what one
// instance costs at that size: series and bytes of a text scrape, the scrape
// time (median and max of FLEET_SCRAPES GETs of /metrics), peak RSS and CPU
// over the measuring window (FLEET_SECONDS), and the Go heap, stacks and
// goroutines of the last scrape. Figures, not assertions (issue #24's
// targets: RSS ≤ 100 MB, a text scrape ≤ 100 ms; docs/sizing.md).
//
//	go test -run '^$' -bench Fleet -benchtime 1x ./test/bench/
//
// FLEET_BASE=<git revision> also builds the daemon at that revision and runs
// it alternately with this tree's, in the same conditions, and prints both
// side by side with the ratios (after / before). FLEET_LAYOUTS=compact runs one layout.
func BenchmarkFleet(b *testing.B) {
	targets := envInt("FLEET_TARGETS", 1000)
	secs := envInt("FLEET_SECONDS", 30)
	scrapes := envInt("FLEET_SCRAPES", 10)
	layouts := strings.Split(cmp.Or(os.Getenv("FLEET_LAYOUTS"), "compact,full"), ",")
	dir := b.TempDir()
	root := repoRoot(b)
	type build struct{ name, bin string }
	builds := []build{{"this tree", buildDaemon(b, root, filepath.Join(dir, "dbcanary"))}}
	if base := os.Getenv("FLEET_BASE"); base != "" {
		src := filepath.Join(dir, "base")
		if err := os.MkdirAll(src, 0o700); err != nil {
			b.Fatal(err)
		}
		archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, base, src)
		if out, err := archive.CombinedOutput(); err != nil {
			b.Fatalf("FLEET_BASE=%s: git archive: %v\n%s", base, err, out)
		}
		builds = append([]build{{"base " + base, buildDaemon(b, src, filepath.Join(dir, "dbcanary-base"))}}, builds...)
	}
	var cfg strings.Builder
	cfg.WriteString("global: {instance_id: fleet}\ntargets:\n")
	for i := range targets {
		fmt.Fprintf(&cfg, "  - {name: noop-%04d, backend: noop, ops: {noop: {rate: 1}}}\n", i)
	}
	cfgPath := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Logf("load average before: %s", loadavg())
	for range b.N {
		for _, layout := range layouts {
			var got []fleetFigures
			for _, bd := range builds {
				f := fleetRun(b, bd.bin, cfgPath, layout, targets, time.Duration(secs)*time.Second, scrapes)
				got = append(got, f)
				b.Logf("%s: %d noop targets at 1 op/s, --metrics.histograms=%s: %d series, text scrape %.1f MB in %.0f ms (median of %d; max %.0f ms), peak RSS %.0f MB (Go heap in use %.0f MB, stacks %.0f MB, %d goroutines), CPU %.1f %% of a core over %ds",
					bd.name, targets, layout, f.series, float64(f.bytes)/1e6, f.scrapeMedian.Seconds()*1e3, scrapes, f.scrapeMax.Seconds()*1e3, f.rssMB, f.heapMB, f.stackMB, f.goroutines, f.cpu, secs)
			}
			f := got[len(got)-1]
			b.ReportMetric(f.rssMB, layout+"-rss-MB")
			b.ReportMetric(f.cpu, layout+"-cpu-%")
			b.ReportMetric(f.scrapeMedian.Seconds()*1e3, layout+"-scrape-ms")
			b.ReportMetric(float64(f.series), layout+"-series")
			if len(got) == 2 { // on stdout: the benchmark log keeps 10 lines
				fmt.Printf("--metrics.histograms=%s, %d targets, %s -> this tree:\n%s", layout, targets, builds[0].name, compareFigures(got[0], got[1]))
			}
		}
	}
}

// buildDaemon builds cmd/dbcanary of the module at src into bin.
func buildDaemon(b testing.TB, src, bin string) string {
	b.Helper()
	build := exec.Command("go", "build", "-o", bin, "./cmd/dbcanary")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build in %s: %v\n%s", src, err, out)
	}
	return bin
}

// compareFigures is a before/after table with the ratio of each figure.
func compareFigures(before, after fleetFigures) string {
	var s strings.Builder
	tw := tabwriter.NewWriter(&s, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tbefore\tafter\tafter/before\t")
	row := func(name, unit string, a, b float64) {
		fmt.Fprintf(tw, "%s\t%s%s\t%s%s\t%.2f\t\n", name, strconv.FormatFloat(a, 'f', -1, 64), unit, strconv.FormatFloat(b, 'f', -1, 64), unit, b/a)
	}
	round := func(x float64) float64 { return math.Round(x*10) / 10 }
	row("peak RSS", " MB", round(before.rssMB), round(after.rssMB))
	row("Go heap in use", " MB", round(before.heapMB), round(after.heapMB))
	row("goroutine stacks", " MB", round(before.stackMB), round(after.stackMB))
	row("goroutines", "", float64(before.goroutines), float64(after.goroutines))
	row("scrape median", " ms", math.Round(before.scrapeMedian.Seconds()*1e3), math.Round(after.scrapeMedian.Seconds()*1e3))
	row("scrape max", " ms", math.Round(before.scrapeMax.Seconds()*1e3), math.Round(after.scrapeMax.Seconds()*1e3))
	row("CPU", " % of a core", round(before.cpu), round(after.cpu))
	row("series", "", float64(before.series), float64(after.series))
	row("text scrape", " MB", round(float64(before.bytes)/1e6), round(float64(after.bytes)/1e6))
	_ = tw.Flush()
	return s.String()
}

type fleetFigures struct {
	series, bytes           int
	scrapeMedian, scrapeMax time.Duration
	rssMB, cpu              float64
	// From the last scrape's go_memstats_* and go_goroutines.
	heapMB, stackMB float64
	goroutines      int
}

func fleetRun(b *testing.B, bin, cfgPath, layout string, targets int, window time.Duration, scrapes int) fleetFigures {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := exec.CommandContext(ctx, bin, "run", "--config.file", cfgPath, "--web.listen-address", addr,
		"--log.level", "warn", "--metrics.histograms", layout)
	d.Stderr = os.Stderr
	d.Cancel = func() error { return d.Process.Signal(os.Interrupt) }
	d.WaitDelay = 30 * time.Second
	if err := d.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = d.Wait() }()
	url := "http://" + addr + "/metrics"

	// Warm-up: every target has run its op once (its series all exist).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		body, _, err := get(url)
		if err == nil && strings.Count(body, "dbcanary_last_success_timestamp_seconds{") == targets && countZeroSuccess(body) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not every target succeeded within 3 minutes (%v)", layout, err)
		}
		time.Sleep(time.Second)
	}

	var f fleetFigures
	pid := d.Process.Pid
	c0, t0 := procCPU(b, pid), time.Now()
	var took []time.Duration
	var last string
	end := t0.Add(window)
	for time.Now().Before(end) || len(took) < scrapes {
		if rss := procRSS(b, pid); rss > f.rssMB {
			f.rssMB = rss
		}
		if len(took) < scrapes {
			body, d, err := get(url)
			if err != nil {
				b.Fatal(err)
			}
			took = append(took, d)
			f.bytes = len(body)
			f.series = countSeries(body)
			last = body
		}
		time.Sleep(time.Second)
	}
	f.cpu = (procCPU(b, pid) - c0).Seconds() / time.Since(t0).Seconds() * 100
	slices.Sort(took)
	f.scrapeMedian, f.scrapeMax = took[len(took)/2], took[len(took)-1]
	f.heapMB = sampleValue(last, "go_memstats_heap_inuse_bytes") / (1 << 20)
	f.stackMB = sampleValue(last, "go_memstats_stack_inuse_bytes") / (1 << 20)
	f.goroutines = int(sampleValue(last, "go_goroutines"))
	return f
}

// sampleValue is the value of an unlabelled series in a text scrape (0 if absent).
func sampleValue(body, name string) float64 {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			x, _ := strconv.ParseFloat(v, 64)
			return x
		}
	}
	return 0
}

func get(url string) (string, time.Duration, error) {
	t0 := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), time.Since(t0), err
}

func countSeries(body string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

// countZeroSuccess counts ops without a success yet.
func countZeroSuccess(body string) int {
	n := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "dbcanary_last_success_timestamp_seconds{") && strings.HasSuffix(l, "} 0") {
			n++
		}
	}
	return n
}

// procCPU is a process's user+system time (/proc/PID/stat, clock ticks of 100 Hz).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// procRSS is a process's resident set in MB (VmRSS).
func procRSS(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// repoRoot is the module root (test/bench is two levels below it).
func repoRoot(b testing.TB) string {
	wd, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}
