//go:build integration

package tls

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/dbcanary/dbcanary/test/stack"
)

// startPrivate is stack.StartPrivate, and removes dir when the test ends
// (after the server is stopped: cleanups run last-registered first).
func startPrivate(t *testing.T, script, dir string, env ...string) stack.Env {
	t.Helper()
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return stack.StartPrivate(t, script, dir, env...)
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
