//go:build integration

package tls

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/test/stack"
)

// startPrivate starts a server of its own with test/stack/<script>.sh, its
// stack directory dir and the DBCANARY_* settings in env, stops it and removes
// dir when the test ends, and returns what `<script>.sh env` prints.
func startPrivate(t *testing.T, script, dir string, env ...string) stack.Env {
	t.Helper()
	run := func(action string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(stack.Dir(), script+".sh"), action)
		cmd.Env = append(append(os.Environ(), "DBCANARY_STACK_DIR="+dir), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Errorf("stop private %s: %v\n%s", script, err, out)
		}
		_ = os.RemoveAll(dir)
	})
	if out, err := run("start"); err != nil {
		t.Fatalf("start private %s: %v\n%s", script, err, out)
	}
	out, err := run("env")
	if err != nil {
		t.Fatalf("%s.sh env: %v", script, err)
	}
	e := stack.Env{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			e[k] = v
		}
	}
	return e
}

// startDaemon runs `dbcanary run` on cfg until the test ends and returns its
// listen address and its log.
func startDaemon(t *testing.T, cfg string) (addr string, logs *bytes.Buffer) {
	t.Helper()
	addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, "run", "--config.file", cfg, "--web.listen-address", addr)
	logs = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	return addr, logs
}
