//go:build integration

package rabbitmq_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/web"
	_ "github.com/dbcanary/dbcanary/probes/rabbitmq"
	"github.com/dbcanary/dbcanary/test/stack"
)

var env stack.Env

func TestMain(m *testing.M) {
	env = stack.Must("rabbitmq")
	stack.Exit(m.Run())
}

func config(name, instance, passwordFile, extra string) string {
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
      loss_timeout: 3s
%s`, instance, name, env["DBCANARY_TEST_RABBITMQ_URL"], env["DBCANARY_TEST_RABBITMQ_USER"], passwordFile, extra)
}

// dial opens a second, independent connection (a "second publisher").
func dial(t *testing.T) *amqp.Channel {
	t.Helper()
	pw, err := os.ReadFile(env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.DialConfig(env["DBCANARY_TEST_RABBITMQ_URL"], amqp.Config{SASL: []amqp.Authentication{
		&amqp.PlainAuth{Username: env["DBCANARY_TEST_RABBITMQ_USER"], Password: strings.TrimSpace(string(pw))}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func queues(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command(filepath.Join("/usr/lib/rabbitmq/bin/rabbitmqctl"), "list_queues", "-q", "--no-table-headers", "name")
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(stack.DataDir(), "rabbitmq/home"), "RABBITMQ_NODENAME=dbcanary@localhost")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("list_queues: %v: %s", err, out)
	}
	qs := strings.Fields(string(out))
	sort.Strings(qs)
	return qs
}

func TestPublishConsumeFillHistograms(t *testing.T) {
	before := queues(t)
	h := enginetest.Start(t, config("mq-basic", "inst-a", env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"], ""))
	enginetest.WaitFor(t, 20*time.Second, "publish and consume samples", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "publish", "result": "ok"}) >= 10 &&
			h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}) >= 10
	})
	for _, op := range []string{"publish", "consume"} {
		if n := h.HistogramCount(t, "dbcanary_op_service_time_seconds", enginetest.L{"op": op, "result": "ok"}); n == 0 {
			t.Errorf("%s: no service time samples", op)
		}
	}
	if b := h.Value(t, "dbcanary_op_bytes_total", enginetest.L{"op": "publish", "direction": "sent"}); b < 10*1024 {
		t.Errorf("publish bytes sent = %v", b)
	}
	if b := h.Value(t, "dbcanary_op_bytes_total", enginetest.L{"op": "consume", "direction": "received"}); b < 10*1024 {
		t.Errorf("consume bytes received = %v", b)
	}
	if up := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "mq-basic"}); up != 1 {
		t.Errorf("up = %v", up)
	}
	if f := h.Value(t, "dbcanary_op_failures_total", nil); f != 0 {
		t.Errorf("failures on a healthy broker: %v", f)
	}
	// End-to-end latency on loopback is milliseconds; a generous bound catches a broken clock origin.
	mean := h.HistogramSum(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}) /
		float64(h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}))
	if mean <= 0 || mean > 1 {
		t.Errorf("mean end-to-end latency %v s", mean)
	}
	// The canary touched only its own queues, named with the instance id
	// (the durability ledger's, once ledger_write ran).
	after := queues(t)
	for _, q := range diff(after, before) {
		// Other packages' daemons (make test's second lane) declare canary
		// queues of their own meanwhile: any other new queue is this one's.
		if strings.HasPrefix(q, "dbcanary.") && !strings.Contains(q, "mq-basic") && !strings.Contains(q, "inst-a") {
			continue
		}
		if q != "dbcanary.mq-basic.inst-a" && q != "dbcanary.mq-basic.inst-a.ledger" {
			t.Errorf("queue added: %s", q)
		}
	}
	if !slices.Contains(after, "dbcanary.mq-basic.inst-a") {
		t.Errorf("canary queue missing: %v", after)
	}
}

// TestAlteredBodyIsMismatch: a second publisher puts an altered canary
// message and a foreign message into the canary queue; both are caught.
func TestAlteredBodyIsMismatch(t *testing.T) {
	h := enginetest.Start(t, config("mq-mismatch", "inst-m", env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"], ""))
	enginetest.WaitFor(t, 20*time.Second, "first consume", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}) >= 1
	})
	ch := dial(t)
	q := "dbcanary.mq-mismatch.inst-m"
	// A well-formed header whose payload differs from what (run, seq) generates.
	altered := []byte(fmt.Sprintf("dbcanary/1 inst-m 1 1 %d %d 200\n", time.Now().UnixNano(), time.Now().UnixNano()))
	altered = append(altered, []byte(strings.Repeat("X", 200-len(altered)))...)
	for _, body := range [][]byte{altered, []byte("hello from another application")} {
		if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.WaitFor(t, 10*time.Second, "two mismatches", func() bool {
		return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"op": "consume", "cause": "mismatch"}) >= 2
	})
	if up := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "mq-mismatch"}); up != 1 {
		t.Errorf("a mismatch means the broker answered: up = %v", up)
	}
}

// TestStolenMessagesAreLost: a rogue consumer on the canary queue takes
// messages; the canary counts each confirmed message it never got as lost.
func TestStolenMessagesAreLost(t *testing.T) {
	h := enginetest.Start(t, config("mq-lost", "inst-l", env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"], ""))
	enginetest.WaitFor(t, 20*time.Second, "first consume", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}) >= 1
	})
	ch := dial(t)
	deliveries, err := ch.Consume("dbcanary.mq-lost.inst-l", "thief", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	stolen := 0
	timeout := time.After(2 * time.Second)
steal:
	for {
		select {
		case <-deliveries:
			stolen++
		case <-timeout:
			break steal
		}
	}
	// Whatever the broker already pushed to the thief is gone too: count it.
	if err := ch.Cancel("thief", false); err != nil {
		t.Fatal(err)
	}
	for range deliveries {
		stolen++
	}
	ch.Close()
	if stolen == 0 {
		t.Fatal("the thief got nothing")
	}
	enginetest.WaitFor(t, 15*time.Second, "lost messages counted", func() bool {
		return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"op": "consume", "cause": "lost"}) >= float64(stolen)
	})
	if lost := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"op": "consume", "cause": "lost"}); lost > float64(stolen) {
		t.Errorf("lost %v > stolen %d: a delivered message was counted lost", lost, stolen)
	}
}

// TestInstancesDoNotInterfere: two instances probe the same target name on
// the same broker; each reads only its own queue, so neither sees a
// mismatch or a loss.
func TestInstancesDoNotInterfere(t *testing.T) {
	a := enginetest.Start(t, config("mq-shared", "zone-a", env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"], ""))
	b := enginetest.Start(t, config("mq-shared", "zone-b", env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"], ""))
	enginetest.WaitFor(t, 20*time.Second, "both consuming", func() bool {
		return a.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}) >= 20 &&
			b.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"}) >= 20
	})
	time.Sleep(4 * time.Second) // past loss_timeout
	for name, h := range map[string]*enginetest.Harness{"a": a, "b": b} {
		if f := h.Value(t, "dbcanary_op_failures_total", nil); f != 0 {
			t.Errorf("instance %s: %v failures", name, f)
		}
	}
}

// TestWrongPasswordIsAuthAndMetricsStillServed also checks the daemon's
// /metrics keeps answering while the target is down.
func TestWrongPasswordIsAuthAndMetricsStillServed(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(bad, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := enginetest.Start(t, config("mq-auth", "inst-x", bad, ""))
	handler, err := web.Handler(web.Options{Registry: h.Registry, MetricsPath: "/metrics", Reload: func() error { return nil }, Logger: enginetest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	enginetest.WaitFor(t, 20*time.Second, "auth failures", func() bool {
		return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "mq-auth", "cause": "auth"}) >= 1
	})
	if up := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "mq-auth"}); up != 0 {
		t.Errorf("up = %v, want 0", up)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `dbcanary_target_up{backend="rabbitmq",target="mq-auth"} 0`) {
		t.Errorf("/metrics: %d\n%s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "not-the-password") {
		t.Error("the password leaked into /metrics")
	}
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
