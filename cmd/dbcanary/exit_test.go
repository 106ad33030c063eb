package main

import (
	"encoding/json"
	"net"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/common/version"
)

// TestExitCodes pins the documented exit codes (docs/cli.md): usage 2, config 3,
// runtime 4, failed ops 1.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := writeConfig(t, dir, cliNoopConfig)
	bad := writeConfig(t, t.TempDir(), "targets:\n  - {name: x, backend: nope}\n")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"run", "--no-such-flag"}, exitUsage, "unknown flag"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"extra argument", []string{"check-config", "extra"}, exitUsage, "unknown command"},
		{"bad log level", []string{"check-config", "--log.level", "loud", "--config.file", good}, exitUsage, "--log.level"},
		{"bad shard flags", []string{"run", "--shard.count", "-1", "--config.file", good}, exitUsage, "--shard.count"},
		{"bench shard without start", []string{"bench", "--profile", "floor", "--shard", "1/2", "--config.file", good}, exitUsage, "--shard 1/2 needs --start-at"},
		{"bench bad shard", []string{"bench", "--profile", "floor", "--shard", "2/2", "--config.file", good}, exitUsage, `--shard "2/2": the index must be 0..1`},
		{"bench bad start", []string{"bench", "--profile", "floor", "--start-at", "soon", "--config.file", good}, exitUsage, `--start-at "soon": want an RFC 3339 time`},
		{"bench merge nothing", []string{"bench", "merge"}, exitUsage, "requires at least 1 arg"},
		{"bench merge not a report", []string{"bench", "merge", good}, exitRuntime, good + ": not a bench JSON report"},
		{"invalid config", []string{"check-config", "--config.file", bad}, exitConfig, `unknown backend "nope"`},
		{"missing config", []string{"run", "--config.file", filepath.Join(dir, "absent.yaml")}, exitConfig, "cannot read config"},
		{"invalid baseline", []string{"generate", "rules", "--baseline", bad, "--out", filepath.Join(dir, "r.yml")}, exitConfig, ""},
		{"port in use", []string{"run", "--config.file", good, "--web.listen-address", busy.Addr().String()}, exitRuntime, "address already in use"},
		{"failed op", []string{"once", "--config.file", writeConfig(t, t.TempDir(), cliNoopConfig+"  - {name: broken, backend: noop, noop: {failure_ratio: 1}}\n")}, exitFailed, "1 of 2 op(s) failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d; stderr lacks %q?\n%s", code, tc.code, tc.want, errOut)
			}
		})
	}
}

// TestFatalErrorsInJSON: with --log.format=json every line a failing daemon
// writes is a JSON log record, config errors and a port in use included.
func TestFatalErrorsInJSON(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	good := writeConfig(t, t.TempDir(), cliNoopConfig)
	bad := writeConfig(t, t.TempDir(), "targets:\n  - {name: x, backend: nope}\n  - {name: Y, backend: noop}\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msgs []string
	}{
		{"invalid config", []string{"--config.file", bad}, exitConfig, []string{`unknown backend \"nope\"`, `\"Y\" must be`}},
		{"port in use", []string{"--config.file", good, "--web.listen-address", busy.Addr().String()}, exitRuntime, []string{"address already in use", `"exit_code":4`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"run", "--log.format", "json"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
					t.Errorf("not a JSON log record: %q (%v)", line, err)
				}
			}
			for _, m := range tc.msgs {
				if !strings.Contains(errOut, m) {
					t.Errorf("stderr lacks %s:\n%s", m, errOut)
				}
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	code, out, _ := run(t, "--version")
	if code != 0 || !strings.Contains(out, "dbcanary, version "+version.Version) || !strings.Contains(out, "revision:") {
		t.Errorf("--version: exit %d\n%s", code, out)
	}
}

// TestFillVersion: a plain `go build`/`go install` (no ldflags) still reports a
// version and revision, from what the toolchain recorded.
func TestFillVersion(t *testing.T) {
	saved := []string{version.Version, version.Revision, version.BuildDate, version.Branch, version.BuildUser}
	defer func() {
		version.Version, version.Revision, version.BuildDate, version.Branch, version.BuildUser = saved[0], saved[1], saved[2], saved[3], saved[4]
	}()
	reset := func() {
		version.Version, version.Revision, version.BuildDate, version.Branch, version.BuildUser = "", "", "", "", ""
	}
	settings := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-25T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}

	reset()
	fillVersion(&debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}, Settings: settings})
	if version.Version != "0.2.0" || version.Revision != "0123abcd" || version.BuildDate != "2026-11-25T10:00:00Z" {
		t.Errorf("go install @v0.2.0: version %q revision %q date %q", version.Version, version.Revision, version.BuildDate)
	}
	reset()
	fillVersion(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings})
	if version.Version != "devel-dirty" {
		t.Errorf("go build in a dirty tree: version %q", version.Version)
	}
	reset()
	fillVersion(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	if version.Version != "devel" || version.Revision != "unknown" {
		t.Errorf("no VCS data: version %q revision %q", version.Version, version.Revision)
	}
	version.Version, version.Revision = "1.2.3", "feed"
	fillVersion(&debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}, Settings: settings})
	if version.Version != "1.2.3" || version.Revision != "feed" {
		t.Errorf("ldflags values were overwritten: %q %q", version.Version, version.Revision)
	}
}
