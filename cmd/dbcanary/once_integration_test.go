//go:build integration

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/test/stack"
)

var env stack.Env

func TestMain(m *testing.M) {
	env = stack.Must("rabbitmq")
	code := m.Run()
	stack.Cleanup()
	os.Exit(code)
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
	for _, want := range []string{"mq      rabbitmq  consume  ok", "mq      rabbitmq  publish  ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	bad := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(bad, []byte("wrong-password-marker"), 0o600)
	code, out, errOut = run(t, "once", "--config.file", rabbitConfig(t, bad))
	if code != 1 || !strings.Contains(out, "auth") || !strings.Contains(errOut, "2 of 2 op(s) failed") {
		t.Errorf("wrong password: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "wrong-password-marker") {
		t.Error("the password appears in the output")
	}
}
