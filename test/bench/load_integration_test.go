//go:build integration && storeload

package bench

// The load one dbcanary instance puts on each store at each backend's
// default ops and rates (make bench-load; docs/load.md keeps the latest
// table). Not part of make test: it measures for minutes and prints figures.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/test/stack"
)

// loadSample is what one daemon had done at one moment.
type loadSample struct {
	at                  time.Time
	ops, sent, received float64 // scheduled op attempts, payload bytes (dbcanary_op_bytes_total)
	rchar, wchar        float64 // bytes the process read and wrote through syscalls (/proc/PID/io)
	scrape              int     // size of the /metrics body this sample read
}

var (
	countLine = regexp.MustCompile(`(?m)^dbcanary_op_latency_seconds_count\{([^}]*)\} (\S+)$`)
	bytesLine = regexp.MustCompile(`(?m)^dbcanary_op_bytes_total\{([^}]*)\} (\S+)$`)
	expected  = regexp.MustCompile(`(?m)^  (\S+) \((\S+)\): ([0-9.]+) ops/s, ([0-9.]+ [KMi]*B/s) to the store, ([0-9.]+ [KMi]*B/s) from it$`)
)

func procIO(t *testing.T, pid int) (rchar, wchar float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatalf("/proc/%d/io: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch k {
		case "rchar":
			rchar = f
		case "wchar":
			wchar = f
		}
	}
	return rchar, wchar
}

func sample(t *testing.T, pid int, url string) loadSample {
	s := loadSample{at: time.Now()}
	s.rchar, s.wchar = procIO(t, pid)
	body := tryGet(url)
	s.scrape = len(body)
	for _, m := range countLine.FindAllStringSubmatch(body, -1) {
		if strings.Contains(m[1], `op="consume"`) { // async: one sample per message the publish sent
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		s.ops += v
	}
	for _, m := range bytesLine.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if strings.Contains(m[1], `direction="sent"`) {
			s.sent += v
		} else {
			s.received += v
		}
	}
	return s
}

func tryGet(url string) string {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

var (
	rateLine = regexp.MustCompile(`(?m)^dbcanary_op_expected_rate\{[^}]*op="([^"]+)"[^}]*\} (\S+)$`)
	opOf     = regexp.MustCompile(`op="([^"]+)"`)
)

// warm reports whether every scheduled op has run at least once.
func warm(body string) bool {
	want := map[string]bool{}
	for _, m := range rateLine.FindAllStringSubmatch(body, -1) {
		if v, _ := strconv.ParseFloat(m[2], 64); v > 0 {
			want[m[1]] = true
		}
	}
	for _, m := range countLine.FindAllStringSubmatch(body, -1) {
		if v, _ := strconv.ParseFloat(m[2], 64); v > 0 {
			if op := opOf.FindStringSubmatch(m[1]); op != nil {
				delete(want, op[1])
			}
		}
	}
	return len(want) == 0 && strings.Contains(body, "dbcanary_op_expected_rate")
}

// TestStoreLoad runs one daemon per backend on its defaults (no ops:
// section, so every op at its default rate) against the local stack, and
// after a warm-up measures for LOAD_WINDOW (default 3m): op attempts per
// second, payload bytes per second each way, and the bytes the process
// moved through its sockets (/proc/PID/io, less the measuring scrape), next
// to what check-config estimates.
func TestStoreLoad(t *testing.T) {
	window := 3 * time.Minute
	if v := os.Getenv("LOAD_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LOAD_WINDOW=%q: %v", v, err)
		}
		window = d
	}
	var all struct {
		Global  map[string]any   `yaml:"global"`
		Targets []map[string]any `yaml:"targets"`
	}
	raw, err := os.ReadFile(stackConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	type result struct {
		backend, estimate string
		first, last       loadSample
	}
	results := make([]*result, len(all.Targets))
	var wg sync.WaitGroup
	for i, tg := range all.Targets {
		backend := tg["backend"].(string)
		if backend == "cassandra" { // one node: the defaults' RF 3 cannot be met
			tg["cassandra"].(map[string]any)["replication"] = map[string]any{"class": "SimpleStrategy", "replication_factor": 1}
		}
		cfg, err := yaml.Marshal(map[string]any{"global": map[string]any{"instance_id": "load-" + backend}, "targets": []any{tg}})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), backend+".yaml")
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		_, est, _ := run(t, time.Minute, "check-config", "--config.file", path)
		r := &result{backend: backend}
		if m := expected.FindStringSubmatch(est); m != nil {
			r.estimate = fmt.Sprintf("%s ops/s, %s / %s", m[3], m[4], m[5])
		} else {
			t.Errorf("check-config printed no load line for %s:\n%s", backend, est)
		}
		results[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := fmt.Sprintf("127.0.0.1:%d", 19800+i)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run", "--config.file", path, "--web.listen-address", addr, "--log.level", "warn")
			cmd.Dir = stack.RepoRoot()
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			defer func() { cancel(); _ = cmd.Wait() }()
			url := "http://" + addr + "/metrics"
			// Warm-up: every scheduled op has run once (the namespace made,
			// the first object of each size written) before the window starts.
			deadline := time.Now().Add(5 * time.Minute)
			for !warm(tryGet(url)) {
				if time.Now().After(deadline) {
					t.Errorf("%s: not every op ran within 5m:\n%s", backend, tryGet(url))
					return
				}
				time.Sleep(time.Second)
			}
			r.first = sample(t, cmd.Process.Pid, url)
			time.Sleep(window)
			r.last = sample(t, cmd.Process.Pid, url)
		}()
	}
	wg.Wait()

	var b strings.Builder
	fmt.Fprintf(&b, "Load of one dbcanary instance per store at each backend's defaults, measured %s over %s (command: make bench-load).\n\n", time.Now().UTC().Format("2006-01-02"), window)
	b.WriteString("| backend | ops/s | payload to the store | payload from it | socket+file bytes written | read | check-config's estimate (ops/s, to / from) |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r == nil || r.last.at.IsZero() {
			continue
		}
		secs := r.last.at.Sub(r.first.at).Seconds()
		rate := func(a, b float64) string { return byteRate((b - a) / secs) }
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s | %s | %s | %s |\n", r.backend, (r.last.ops-r.first.ops)/secs,
			rate(r.first.sent, r.last.sent), rate(r.first.received, r.last.received),
			rate(r.first.wchar+float64(r.first.scrape), r.last.wchar), rate(r.first.rchar, r.last.rchar), r.estimate)
	}
	fmt.Print("\n" + b.String())
	if err := os.WriteFile(filepath.Join(artefacts, "store-load.md"), []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}

func byteRate(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.2f MiB/s", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB/s", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B/s", v)
}
