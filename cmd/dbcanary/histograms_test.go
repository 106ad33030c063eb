package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the daemon's logger and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemonLog is startDaemon with the daemon's log kept.
func startDaemonLog(t *testing.T, args ...string) (base string, log *syncBuffer) {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	log = &syncBuffer{}
	root, _ := newRootCmd(io.Discard, log)
	root.SetArgs(append([]string{"run", "--web.listen-address", addr, "--shutdown.grace-period", "1s"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon exited with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10 s")
		}
	})
	base = "http://" + addr
	waitFor(t, "the daemon to come up", func() bool {
		resp, err := http.Get(base + "/-/healthy")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return base, log
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func reload(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// fullOnly is a series only the full layout has: a bound that is neither a
// board bound nor a noop threshold.
const fullOnly = `dbcanary_op_latency_seconds_bucket{backend="noop",op="noop",result="ok",target="alpha",le="0.0005"}`

const layoutConfig = `
global: {instance_id: cli-test, metrics: {histograms: %s}}
targets:
  - {name: alpha, backend: noop, ops: {noop: {rate: 20}}}
`

func configWith(layout string) string { return strings.Replace(layoutConfig, "%s", layout, 1) }

// TestHistogramsFromConfig: global.metrics.histograms picks the layout; a
// reload asking for another layout is refused with a message naming the key
// (the previous config keeps running, reload_successful 0); one that keeps the
// layout is applied.
func TestHistogramsFromConfig(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, configWith("full"))
	base, log := startDaemonLog(t, "--config.file", cfgPath)
	waitFor(t, "full buckets", func() bool {
		_, body := get(t, http.DefaultClient, base+"/metrics")
		return strings.Contains(body, fullOnly)
	})

	writeConfig(t, dir, strings.ReplaceAll(configWith("compact"), "alpha", "beta"))
	code, body := reload(t, base)
	want := "global.metrics.histograms: the config asks for compact, the daemon runs full: the layout cannot change on reload (every op histogram would be re-created); restart dbcanary to apply it"
	if code != http.StatusInternalServerError || !strings.Contains(body, want) {
		t.Errorf("reload to compact: %d %q, want 500 with %q", code, body, want)
	}
	if !strings.Contains(log.String(), "config reload failed; the previous config keeps running") || !strings.Contains(log.String(), "restart dbcanary to apply it") {
		t.Errorf("no log line for the refused reload:\n%s", log)
	}
	_, m := get(t, http.DefaultClient, base+"/metrics")
	if !strings.Contains(m, "dbcanary_config_last_reload_successful 0") || !strings.Contains(m, `target="alpha"`) || strings.Contains(m, `target="beta"`) {
		t.Error("a refused reload must keep the previous config and set reload_successful to 0")
	}

	// The same layout and another target: applied.
	writeConfig(t, dir, strings.ReplaceAll(configWith("full"), "alpha", "beta"))
	if code, body := reload(t, base); code != http.StatusOK {
		t.Fatalf("reload keeping the layout: %d %s", code, body)
	}
	waitFor(t, "beta in the full layout", func() bool {
		_, body := get(t, http.DefaultClient, base+"/metrics")
		return strings.Contains(body, strings.ReplaceAll(fullOnly, "alpha", "beta")) && strings.Contains(body, "dbcanary_config_last_reload_successful 1")
	})
}

// TestHistogramsFlagWinsOverConfig: --metrics.histograms, when given, wins
// over the config (with a warning when they differ), also across reloads.
func TestHistogramsFlagWinsOverConfig(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, configWith("full"))
	base, log := startDaemonLog(t, "--config.file", cfgPath, "--metrics.histograms", "compact")
	compact := strings.ReplaceAll(fullOnly, `le="0.0005"`, `le="0.005"`)
	waitFor(t, "compact buckets", func() bool {
		_, body := get(t, http.DefaultClient, base+"/metrics")
		return strings.Contains(body, compact)
	})
	if _, body := get(t, http.DefaultClient, base+"/metrics"); strings.Contains(body, fullOnly) {
		t.Error("the config's full layout won over --metrics.histograms=compact")
	}
	if want := `msg="--metrics.histograms overrides the config's global.metrics.histograms" flag=compact config=full`; !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
	// The file changing its layout is no reason to refuse a reload the flag
	// overrides; a file that does not set it gets no warning.
	writeConfig(t, dir, strings.ReplaceAll(strings.Replace(configWith(""), ", metrics: {histograms: }", "", 1), "alpha", "beta"))
	if code, body := reload(t, base); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	if n := strings.Count(log.String(), "overrides the config's"); n != 1 {
		t.Errorf("%d override warnings, want only the first (the reloaded file does not set the layout):\n%s", n, log)
	}
}
