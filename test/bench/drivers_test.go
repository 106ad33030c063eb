//go:build linux && !integration

package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bench "github.com/dbcanary/dbcanary/internal/bench"
	"github.com/dbcanary/dbcanary/internal/hist"
)

// TestShardedDrivers runs three `dbcanary bench` processes as drivers 0/3,
// 1/3 and 2/3 of one run (the noop probe, closed loop, a common --start-at)
// and merges their reports with `dbcanary bench merge`: the op counts add up
// exactly, the merged percentiles are those of every driver's recorded
// values together (computed here from the drivers' raw buckets, sorted, by
// rank), the rates add up, and each driver worked in a namespace of its own.
// No server needed: this is what the chart's bench Job does, on one machine.
// It runs in the unit pass only (the integration pass would run it again).
func TestShardedDrivers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three bench processes")
	}
	dir := t.TempDir()
	bin := buildDaemon(t, repoRoot(t), filepath.Join(dir, "dbcanary"))
	cfg := filepath.Join(dir, "dbcanary.yaml")
	if err := os.WriteFile(cfg, []byte("global: {instance_id: drivers}\ntargets: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 3
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	startAt := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	var cmds []*exec.Cmd
	var files []string
	for i := range n {
		file := filepath.Join(dir, fmt.Sprintf("driver-%d.json", i))
		files = append(files, file)
		cmd := exec.CommandContext(ctx, bin, "--config.file", cfg, "bench", "--profile", "floor", "--rate", "0", "--workers", "2",
			"--duration", "2s", "--warmup", "0s", "--shard", fmt.Sprintf("%d/%d", i, n), "--start-at", startAt, "--json", file)
		cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("driver %d: %v\n%s", i, err, cmd.Stderr)
		}
	}
	merged := filepath.Join(dir, "merged.json")
	out, err := exec.CommandContext(ctx, bin, "bench", "merge", "--json", merged, "--html", filepath.Join(dir, "merged.html"), files[2], files[0], files[1]).CombinedOutput()
	if err != nil {
		t.Fatalf("bench merge: %v\n%s", err, out)
	}
	drivers := make([]*bench.Report, n)
	for i, f := range files {
		drivers[i] = readReport(t, f)
	}
	m := readReport(t, merged)
	checkMerged(t, m, drivers)
	t.Logf("summary rate %.0f ops/s over %.3f s in common, %d drivers\n%s", m.Stages[0].Throughput, m.Stages[0].Seconds, n, out)
}

func readReport(t *testing.T, path string) *bench.Report {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := bench.ReadReport(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkMerged compares the merged report's one stage and op with the drivers'.
func checkMerged(t *testing.T, m *bench.Report, drivers []*bench.Report) {
	t.Helper()
	mo := m.Stages[0].Ops[0]
	var count, ok, failed uint64
	var rate float64
	var lows []int64
	namespaces := map[string]bool{}
	for i, d := range drivers {
		o := d.Stages[0].Ops[0]
		count, ok, failed, rate = count+o.Count, ok+o.OK, failed+o.Failed, rate+o.Throughput
		if !strings.Contains(d.Instance, fmt.Sprintf("-bench-s%d-", i)) || namespaces[d.Instance] {
			t.Errorf("driver %d: instance %q: not a namespace of its own", i, d.Instance)
		}
		namespaces[d.Instance] = true
		h, err := hist.FromSnapshot(o.Histograms.Latency)
		if err != nil {
			t.Fatal(err)
		}
		if h.Count() != o.Count || o.Count == 0 {
			t.Fatalf("driver %d: %d ops, its histogram %d", i, o.Count, h.Count())
		}
		lows = append(lows, expand(o.Histograms.Latency)...)
	}
	if mo.Count != count || mo.OK != ok || mo.Failed != failed || uint64(len(lows)) != count {
		t.Errorf("merged %d ops (%d ok, %d failed), drivers %d (%d ok, %d failed)", mo.Count, mo.OK, mo.Failed, count, ok, failed)
	}
	if math.Abs(mo.Throughput-rate) > 1e-6*rate {
		t.Errorf("merged rate %g, drivers' sum %g", mo.Throughput, rate)
	}
	// The union's percentiles by rank, from the drivers' buckets sorted,
	// beside the merged histogram's (ns) and the merged summary's (ms, to the µs).
	slices.Sort(lows)
	mh, err := hist.FromSnapshot(mo.Histograms.Latency)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		q       float64
		summary float64
	}{{0.5, mo.Latency.P50}, {0.9, mo.Latency.P90}, {0.99, mo.Latency.P99}, {0.999, mo.Latency.P999}} {
		rank := min(max(int(math.Ceil(q.q*float64(len(lows)))), 1), len(lows))
		want := midpoint(lows[rank-1], mh.Bits())
		want = min(max(want, mo.Histograms.Latency.MinNS), mo.Histograms.Latency.MaxNS)
		got := mh.Quantile(q.q)
		if got.Nanoseconds() != want || q.summary != float64(got.Round(time.Microsecond))/1e6 {
			t.Errorf("p%g: merged %s (summary %g ms), union of the drivers' values %d ns", q.q*100, got, q.summary, want)
		}
	}
	if len(m.Drivers) != len(drivers) {
		t.Errorf("%d driver rows, want %d", len(m.Drivers), len(drivers))
	}
}

// expand lists every value of a snapshot as its bucket's lowest value.
func expand(s hist.Snapshot) []int64 {
	var out []int64
	for _, b := range s.Buckets {
		for range b[1] {
			out = append(out, b[0])
		}
	}
	return out
}

// midpoint is the value a histogram reports for a bucket (hist.Quantile):
// the middle of the bucket starting at low, in a layout of bits.
func midpoint(low int64, layout uint) int64 {
	width := int64(1)
	if low >= int64(1)<<layout {
		width = int64(1) << (bits.Len64(uint64(low)) - int(layout) - 1)
	}
	return low + (width-1)/2
}
