//go:build integration

package rabbitmq_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbcanary/dbcanary/test/stack"
)

// privateBroker is a RabbitMQ node of this test's own (own node name, ports,
// data and PID file, started by test/stack/rabbitmq.sh), for tests that stop,
// freeze or restart a broker: the shared one on 5672 is never touched.
type privateBroker struct {
	t    testing.TB
	dir  string
	node string
	port int
	dist int
	env  stack.Env
}

// startPrivateBroker starts a private node; it is stopped by PID when the test ends.
func startPrivateBroker(t testing.TB) *privateBroker {
	t.Helper()
	dir, err := os.MkdirTemp("", "dbcanary-rmq-") // short: Erlang dislikes long paths
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &privateBroker{t: t, dir: dir, node: fmt.Sprintf("dbcanary-t%d@localhost", os.Getpid()), port: freePort(t), dist: freePort(t)}
	t.Cleanup(func() {
		b.cont() // in case a test froze it
		if out, err := b.script("stop"); err != nil {
			t.Errorf("stop private broker: %v %s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	if out, err := b.script("start"); err != nil {
		t.Fatalf("start private broker: %v\n%s", err, out)
	}
	out, err := b.script("env")
	if err != nil {
		t.Fatal(err)
	}
	b.env = stack.Env{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			b.env[k] = v
		}
	}
	return b
}

// freePort returns a port nothing listens on, outside the range rabbitmqctl
// uses for its own Erlang node (35672-35682).
func freePort(t testing.TB) int { t.Helper(); return stack.FreePort(t) }

func (b *privateBroker) script(action string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(stack.Dir(), "rabbitmq.sh"), action)
	cmd.Env = append(os.Environ(),
		"DBCANARY_STACK_DIR="+b.dir,
		"DBCANARY_RABBITMQ_NODENAME="+b.node,
		fmt.Sprintf("DBCANARY_RABBITMQ_PORT=%d", b.port),
		fmt.Sprintf("DBCANARY_RABBITMQ_DIST_PORT=%d", b.dist))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (b *privateBroker) stop() {
	b.t.Helper()
	if out, err := b.script("stop"); err != nil {
		b.t.Fatalf("stop: %v\n%s", err, out)
	}
}

func (b *privateBroker) start() {
	b.t.Helper()
	if out, err := b.script("start"); err != nil {
		b.t.Fatalf("start: %v\n%s", err, out)
	}
}

func (b *privateBroker) pid() int {
	raw, err := os.ReadFile(filepath.Join(b.dir, "rabbitmq", "rabbitmq.pid"))
	if err != nil {
		return 0
	}
	var pid int
	_, _ = fmt.Sscan(string(raw), &pid)
	return pid
}

// freeze stops the broker process (SIGSTOP): its sockets stay open but
// nothing answers, as with a hung node or a silent network partition.
func (b *privateBroker) freeze() {
	b.t.Helper()
	if err := syscall.Kill(b.pid(), syscall.SIGSTOP); err != nil {
		b.t.Fatal(err)
	}
}

func (b *privateBroker) cont() {
	if pid := b.pid(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// ctl runs rabbitmqctl against the private node.
func (b *privateBroker) ctl(args ...string) string {
	b.t.Helper()
	return rabbitmqctl(b.t, filepath.Join(b.dir, "rabbitmq", "home"), b.node, args...)
}

func rabbitmqctl(t testing.TB, home, node string, args ...string) string {
	t.Helper()
	cmd := exec.Command("/usr/lib/rabbitmq/bin/rabbitmqctl", args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "RABBITMQ_NODENAME="+node)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// brokerConfig is a dbcanary config for one target on the given broker env.
func brokerConfig(e stack.Env, name, instance, extra string) string {
	return fmt.Sprintf(`
global: {instance_id: %s, timeout: 3s}
targets:
  - name: %s
    backend: rabbitmq
    ops:
      publish: {rate: 10}
      consume: {}
    rabbitmq:
      url: %s
      username: %s
      password_file: %s
%s`, instance, name, e["DBCANARY_TEST_RABBITMQ_URL"], e["DBCANARY_TEST_RABBITMQ_USER"], e["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"], extra)
}
