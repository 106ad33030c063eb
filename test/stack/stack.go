// Package stack starts the real backends integration tests run against, by
// calling the scripts beside this file (test/stack/<backend>.sh). Servers bind
// to 127.0.0.1 only. A backend a test package started is stopped when the
// package's tests end, unless DBCANARY_STACK_KEEP=1 (set by `make test`, which
// stops the whole stack at the end).
package stack

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Dir is the directory holding the stack scripts.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// RepoRoot is the repository root.
func RepoRoot() string { return filepath.Dir(filepath.Dir(Dir())) }

var (
	mu      sync.Mutex
	started = map[string]bool{}
)

// Script runs test/stack/<backend>.sh <action> and returns its stdout.
func Script(backend, action string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(Dir(), backend+".sh"), action)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s.sh %s: %v\n%s", backend, action, err, errb.String())
	}
	return out.String(), nil
}

// ToolsDir is the directory holding the tool scripts (test/tools): programs
// the tests run (helm, pint, chromium, ...), installed and cached, never
// started or stopped.
func ToolsDir() string { return filepath.Join(filepath.Dir(Dir()), "tools") }

// Tool runs test/tools/<name>.sh with args and returns its stdout.
func Tool(name string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(ToolsDir(), name+".sh")}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s.sh %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// MustTool installs a tool (cached) for a test package's TestMain and
// returns its path, exiting on failure.
func MustTool(name string) string {
	if _, err := Tool(name, "install"); err != nil {
		fmt.Fprintf(os.Stderr, "stack: cannot install %s: %v\n", name, err)
		os.Exit(1)
	}
	out, err := Tool(name, "path")
	if err != nil {
		fmt.Fprintf(os.Stderr, "stack: %v\n", err)
		os.Exit(1)
	}
	return strings.TrimSpace(out)
}

// Installed returns the program a tool script prints with a path action
// (`helm.sh path`, `helm.sh docs-path`), which prints where install puts it
// without installing anything; it fails the test when the program is not
// there. Unit tests use it instead of installing (make deps installs every
// tool before make test).
func Installed(t testing.TB, tool, pathAction string) string {
	t.Helper()
	out, err := Tool(tool, pathAction)
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := strings.TrimSpace(out)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is not installed (%s): run `make deps` (test/tools/%s.sh install)", filepath.Base(p), p, tool)
	}
	return p
}

// Env is a backend's connection facts, from `<backend>.sh env` (KEY=VALUE lines).
type Env map[string]string

// Get returns a key or fails the test.
func (e Env) Get(t testing.TB, key string) string {
	t.Helper()
	v, ok := e[key]
	if !ok {
		t.Fatalf("stack env has no %s", key)
	}
	return v
}

// Start starts a backend (idempotent) and returns its env. The first start in
// this process records the backend so Cleanup can stop it.
func Start(backend string) (Env, error) {
	mu.Lock()
	defer mu.Unlock()
	running := exec.Command("bash", filepath.Join(Dir(), backend+".sh"), "status").Run() == nil
	if !running {
		t0 := time.Now()
		if _, err := Script(backend, "start"); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "stack: %s started in %s\n", backend, time.Since(t0).Round(100*time.Millisecond))
		if _, seen := started[backend]; !seen {
			started[backend] = true
		}
	} else if _, seen := started[backend]; !seen {
		started[backend] = false // someone else started it: leave it running
	}
	out, err := Script(backend, "env")
	if err != nil {
		return nil, err
	}
	return parseEnv(out), nil
}

// parseEnv reads the KEY=VALUE lines of a script's env action.
func parseEnv(out string) Env {
	env := Env{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

// StartPrivate starts a server of the test's own with test/stack/<script>.sh
// in the stack directory dir, with the DBCANARY_* settings in env (its ports,
// its shape), stops it when the test ends, and returns what `<script>.sh env`
// prints. The default stack's servers are left alone.
func StartPrivate(t testing.TB, script, dir string, env ...string) Env {
	t.Helper()
	run := func(action string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(Dir(), script+".sh"), action)
		cmd.Env = append(append(os.Environ(), "DBCANARY_STACK_DIR="+dir), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Errorf("stop private %s: %v\n%s", script, err, out)
		}
	})
	if out, err := run("start"); err != nil {
		t.Fatalf("start private %s: %v\n%s", script, err, out)
	}
	out, err := run("env")
	if err != nil {
		t.Fatalf("%s.sh env: %v", script, err)
	}
	return parseEnv(out)
}

// Stop stops a backend now (outage tests).
func Stop(backend string) error {
	_, err := Script(backend, "stop")
	return err
}

// Restart starts a backend stopped by Stop.
func Restart(backend string) error {
	_, err := Script(backend, "start")
	return err
}

// Cleanup stops the backends this process started, unless DBCANARY_STACK_KEEP=1.
// Call it from TestMain after m.Run.
func Cleanup() {
	if os.Getenv("DBCANARY_STACK_KEEP") == "1" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	for b, ours := range started {
		if ours {
			if err := Stop(b); err != nil {
				fmt.Fprintln(os.Stderr, "stack:", err)
			}
		}
	}
}

// Must starts a backend for a test package's TestMain, exiting on failure:
// an integration test never silently skips because its server is missing.
func Must(backend string) Env {
	env, err := Start(backend)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stack: cannot start %s: %v\n", backend, err)
		os.Exit(1)
	}
	return env
}

// figuresMu serialises appends to the figures file within one test binary.
var figuresMu sync.Mutex

// Figure prints a measured figure of an integration test (a proof's result:
// "missing 20, intact 0") on stdout and, when DBCANARY_FIGURES_OUT names a
// file, appends it there as a Markdown list item under a heading of the
// test's name, so `make test` can print every figure at the end: go test
// shows a passing package's output only with -v.
func Figure(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	fmt.Println(line)
	path := os.Getenv("DBCANARY_FIGURES_OUT")
	if path == "" {
		return
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("figures file: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "- `%s`: %s\n", t.Name(), line); err != nil {
		t.Errorf("figures file: %v", err)
	}
}
