//go:build integration

package rabbitmq_test

import (
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
)

func consumeOK(t *testing.T, h *enginetest.Harness) uint64 {
	return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "consume", "result": "ok"})
}

func consumeFailures(t *testing.T, h *enginetest.Harness, cause string) float64 {
	l := enginetest.L{"op": "consume"}
	if cause != "" {
		l["cause"] = cause
	}
	return h.Value(t, "dbcanary_op_failures_total", l)
}

// TestBrokerRestartLosesNothing stops a broker of its own cleanly for several
// loss_timeouts and starts it again: during the outage consume reports a
// failure for every failed publish attempt (it does not go silent), the
// target comes back without restarting the engine, and no message confirmed
// into the durable queue is counted lost.
func TestBrokerRestartLosesNothing(t *testing.T) {
	b := startPrivateBroker(t)
	h := enginetest.Start(t, brokerConfig(b.env, "mq-restart", "inst-r", "      loss_timeout: 1s"))
	enginetest.WaitFor(t, 30*time.Second, "healthy", func() bool { return consumeOK(t, h) >= 20 })
	if f := h.Value(t, "dbcanary_op_failures_total", nil); f != 0 {
		t.Fatalf("%v failures before the outage", f)
	}

	b.stop()
	stopped := time.Now()
	enginetest.WaitFor(t, 20*time.Second, "target down", func() bool {
		return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "mq-restart"}) == 0
	})
	enginetest.WaitFor(t, 20*time.Second, "consume failures during the outage", func() bool {
		return consumeFailures(t, h, "refused") >= 10
	})
	time.Sleep(time.Until(stopped.Add(8 * time.Second))) // eight loss_timeouts of outage
	publishFailed := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"op": "publish"})
	consumeFailed := consumeFailures(t, h, "")
	t.Logf("outage: %v publish failures, %v consume failures (%v refused)", publishFailed, consumeFailed, consumeFailures(t, h, "refused"))
	if consumeFailed == 0 || consumeFailed > publishFailed {
		t.Errorf("consume failures %v: want one per failed publish attempt (%v)", consumeFailed, publishFailed)
	}

	b.start()
	back := time.Now()
	okBefore := consumeOK(t, h)
	enginetest.WaitFor(t, 30*time.Second, "target up with fresh consumes", func() bool {
		return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "mq-restart"}) == 1 && consumeOK(t, h) >= okBefore+10
	})
	t.Logf("up again %s after the broker was ready", time.Since(back).Round(100*time.Millisecond))
	time.Sleep(3 * time.Second) // three loss_timeouts of connected time
	for _, c := range []string{"lost", "mismatch", "not_found"} {
		if v := consumeFailures(t, h, c); v != 0 {
			t.Errorf("%v consume failures with cause %s after a clean broker restart", v, c)
		}
	}
}

// TestFrozenBrokerLosesNothing freezes a broker of its own (SIGSTOP: sockets
// open, nothing answers, as a hung node or a silent partition) for longer than
// loss_timeout but shorter than the heartbeat takes to notice: messages
// confirmed before the freeze arrive after it and none is counted lost.
func TestFrozenBrokerLosesNothing(t *testing.T) {
	b := startPrivateBroker(t)
	h := enginetest.Start(t, `
global: {instance_id: inst-f, timeout: 2s}
targets:
  - name: mq-freeze
    backend: rabbitmq
    max_in_flight: 64
    ops:
      publish: {rate: 50}
      consume: {}
    rabbitmq:
      url: `+b.env["DBCANARY_TEST_RABBITMQ_URL"]+`
      username: `+b.env["DBCANARY_TEST_RABBITMQ_USER"]+`
      password_file: `+b.env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"]+`
      heartbeat: 10s
      loss_timeout: 1s
`)
	enginetest.WaitFor(t, 30*time.Second, "healthy", func() bool { return consumeOK(t, h) >= 50 })
	for round := range 3 {
		b.freeze()
		time.Sleep(6 * time.Second) // six loss_timeouts; the heartbeat notices after 15 s
		b.cont()
		okBefore := consumeOK(t, h)
		enginetest.WaitFor(t, 30*time.Second, "consumes after the freeze", func() bool { return consumeOK(t, h) >= okBefore+50 })
		time.Sleep(2 * time.Second)
		if v := consumeFailures(t, h, "lost"); v != 0 {
			t.Fatalf("round %d: %v messages counted lost across a broker freeze", round, v)
		}
	}
	t.Logf("publish failures during the freezes: %v", h.Value(t, "dbcanary_op_failures_total", enginetest.L{"op": "publish"}))
}
