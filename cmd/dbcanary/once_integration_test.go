//go:build integration

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/test/stack"
)

var env stack.Env

func TestMain(m *testing.M) {
	env = stack.Must("rabbitmq")
	stack.Exit(m.Run())
}

func rabbitConfig(t *testing.T, passwordFile string) string {
	return writeConfig(t, t.TempDir(), fmt.Sprintf(`
global: {instance_id: once-test}
targets:
  - name: mq
    backend: rabbitmq
    rabbitmq:
      url: %s
      username: %s
      password_file: %s
`, env.Get(t, "DBCANARY_TEST_RABBITMQ_URL"), env.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), passwordFile))
}

func TestOnceAgainstRabbitMQ(t *testing.T) {
	code, out, errOut := run(t, "once", "--config.file", rabbitConfig(t, env.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE")))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rows := map[string]string{} // op -> result
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "mq" && f[1] == "rabbitmq" {
			rows[f[2]] = f[3]
		}
	}
	for _, op := range []string{"publish", "consume", "ledger_write", "ledger_check"} {
		if rows[op] != "ok" {
			t.Errorf("op %s: result %q, want ok:\n%s", op, rows[op], out)
		}
	}

	bad := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(bad, []byte("wrong-password-marker"), 0o600)
	code, out, errOut = run(t, "once", "--config.file", rabbitConfig(t, bad))
	if code != 1 || !strings.Contains(out, "auth") || !strings.Contains(errOut, "4 of 4 op(s) failed") {
		t.Errorf("wrong password: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "wrong-password-marker") {
		t.Error("the password appears in the output")
	}
}

// TestOnceBesideTheDaemon: `dbcanary once` with the daemon's own config (a
// Kubernetes startup check in the same pod has the same hostname, hence the
// same instance id) must not consume the daemon's messages: it runs in a
// namespace of its own. Before, the daemon counted every message once took
// as lost: a critical data-integrity page caused by our own tool.
func TestOnceBesideTheDaemon(t *testing.T) {
	cfgFile := writeConfig(t, t.TempDir(), fmt.Sprintf(`
global: {instance_id: beside-test}
targets:
  - name: mq
    backend: rabbitmq
    ops:
      publish: {rate: 20}
      consume: {}
    rabbitmq:
      url: %s
      username: %s
      password_file: %s
      loss_timeout: 3s
`, env.Get(t, "DBCANARY_TEST_RABBITMQ_URL"), env.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), env.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE")))
	body, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	h := enginetest.Start(t, string(body))
	ok := func() float64 {
		return float64(h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}))
	}
	enginetest.WaitFor(t, 30*time.Second, "daemon consuming", func() bool { return ok() >= 20 })
	for range 3 {
		if code, out, errOut := run(t, "once", "--config.file", cfgFile); code != 0 {
			t.Fatalf("once: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	// Every message the daemon published meanwhile must come back to it, and
	// anything it would count lost is counted within loss_timeout.
	before := ok()
	enginetest.WaitFor(t, 30*time.Second, "daemon still consuming", func() bool { return ok() >= before+60 })
	for _, cause := range []string{"lost", "mismatch", "not_found"} {
		if n := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"cause": cause}); n != 0 {
			t.Errorf("the daemon counted %v %s failure(s) while once ran beside it", n, cause)
		}
	}
}
