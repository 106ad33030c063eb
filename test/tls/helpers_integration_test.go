//go:build integration

package tls

import (
	"os"
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

// startDaemon runs `dbcanary run` on cfg until the test ends (not waiting
// for readiness: some tests expect the target to fail) and returns its listen
// address and its log.
func startDaemon(t *testing.T, cfg string) (addr string, logs *stack.Log) {
	t.Helper()
	d := stack.StartDaemon(t, binary, cfg, stack.DaemonOptions{NoWait: true})
	return d.Addr, d.Log
}
