package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/status"
)

// TestRunServesStatus: the daemon wires the status store: targets and their
// namespace, instance id, shard, and reload state on / and /status.json.
func TestRunServesStatus(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, cliNoopConfig)
	c := http.DefaultClient
	base, stop := startDaemon(t, c, "http", "--config.file", cfgPath)
	defer stop()

	snapshot := func() status.Snapshot {
		t.Helper()
		code, body := get(t, c, base+"/status.json")
		if code != 200 {
			t.Fatalf("/status.json: %d %s", code, body)
		}
		var s status.Snapshot
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	deadline := time.Now().Add(10 * time.Second)
	s := snapshot()
	for s.Summary.OK != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("alpha never ok: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
		s = snapshot()
	}
	if a := s.Targets[0]; a.Name != "alpha" || a.Backend != "noop" || a.Namespace != "none (stores nothing)" || a.Ops[0].Name != "noop" {
		t.Errorf("target %+v", a)
	}
	if d := s.Daemon; d.InstanceID != "cli-test" || d.ConfigFile != cfgPath || d.Shard.Count != 1 || !d.Reload.Success || d.Build.GoVersion == "" {
		t.Errorf("daemon %+v", d)
	}
	if code, body := get(t, c, base+"/"); code != 200 || !strings.Contains(body, `id="t-alpha"`) || !strings.Contains(body, "All 1 targets ok") {
		t.Errorf("status page: %d", code)
	}

	// A rejected reload is shown; an accepted one changes the instance id and the targets.
	writeConfig(t, dir, "targets:\n  - name: gamma\n    backend: noop\n    bogus: 1\n")
	if resp, err := c.Post(base+"/-/reload", "", nil); err != nil || resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("bad reload: %v %v", err, resp)
	}
	if r := snapshot().Daemon.Reload; r.Success || !strings.Contains(r.Error, "bogus") || r.LastSuccess.IsZero() {
		t.Errorf("rejected reload: %+v", r)
	}
	writeConfig(t, dir, strings.ReplaceAll(strings.ReplaceAll(cliNoopConfig, "alpha", "beta"), "cli-test", "cli-test-2"))
	if resp, err := c.Post(base+"/-/reload", "", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("reload: %v %v", err, resp)
	}
	s = snapshot()
	if !s.Daemon.Reload.Success || s.Daemon.Reload.Error != "" || s.Daemon.InstanceID != "cli-test-2" || len(s.Targets) != 1 || s.Targets[0].Name != "beta" {
		t.Errorf("after reload: %+v", s)
	}
}
