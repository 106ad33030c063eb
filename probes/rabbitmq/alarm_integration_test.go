//go:build integration

package rabbitmq_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/internal/status"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/rabbitmq"
)

// syncBuffer collects a probe's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// TestResourceAlarmsSayWhy raises a memory alarm, then a disk alarm, on a
// broker of its own: the broker blocks the probe's connection
// (connection.blocked), and publish fails with cause server and the broker's
// reason while its context is still far from the op timeout (60 s): the op
// that meets the block ends when the notification arrives, later ones do not
// publish. The block is logged once at warn, the unblock once. Once the alarm
// clears, publishes succeed again on the same connection.
func TestResourceAlarmsSayWhy(t *testing.T) {
	b := startPrivateBroker(t)
	c := rabbitmq.DefaultConfig
	c.URL, c.Username, c.PasswordFile = b.env["DBCANARY_TEST_RABBITMQ_URL"], b.env["DBCANARY_TEST_RABBITMQ_USER"], b.env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"]
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	logs := &syncBuffer{}
	p, err := rabbitmq.New(probes.Target{Name: "alarm", InstanceID: "it-alarm", Config: &c,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Report: &reports{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	const opTimeout = 60 * time.Second
	// publish runs one publish op and returns how much of its timeout was left.
	publish := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		var out probes.Outcome
		out.Reset(time.Now())
		err := p.Run(ctx, rabbitmq.OpPublish, &out)
		deadline, _ := ctx.Deadline()
		return time.Until(deadline), err
	}
	if _, err := publish(); err != nil {
		t.Fatal(err)
	}
	connections := func() string { return strings.TrimSpace(b.ctl("list_connections", "-q", "--no-table-headers", "pid")) }
	conn := connections()
	if conn == "" || strings.Contains(conn, "\n") {
		t.Fatalf("want the probe's one connection, got %q", conn)
	}

	for i, a := range []struct {
		name, set, on, off, reason string
	}{
		{"memory", "set_vm_memory_high_watermark", "0.001", "0.4", "broker blocked publishing: low on memory"},
		{"disk", "set_disk_free_limit", "1000GB", "50MB", "disk"},
	} {
		t.Cleanup(func() { b.ctl(a.set, a.off) })
		b.ctl(a.set, a.on)
		check := func(left time.Duration, err error) {
			t.Helper()
			if err == nil {
				t.Fatalf("%s alarm: publish succeeded while blocked", a.name)
			}
			t.Logf("%s alarm: %v (%s of the %s op timeout left)", a.name, err, left.Round(time.Millisecond), opTimeout)
			if c := probes.CauseOf(err); c != probes.CauseServer {
				t.Errorf("%s alarm: cause %q, want server", a.name, c)
			}
			// What the status page shows is the error text, cut at MaxMessageBytes.
			if page := status.Redact(err.Error()); !strings.Contains(page, a.reason) || !strings.Contains(page, "rabbitmq-diagnostics alarms") {
				t.Errorf("%s alarm: the message does not give the broker's reason %q: %s", a.name, a.reason, page)
			}
			if left < opTimeout/2 {
				t.Errorf("%s alarm: the publish failed with %s of its %s timeout left: it waited instead of failing when the broker blocked", a.name, left, opTimeout)
			}
		}
		// Publishes go in concurrent batches, as the engine runs them: in the
		// batch that meets the alarm, the broker reads one publish, blocks the
		// connection and reads no more, so the others are waiting for their
		// confirm when connection.blocked arrives.
		type result struct {
			left time.Duration
			err  error
		}
		var failed []result
		enginetest.WaitFor(t, 2*time.Minute, "a publish refused by the "+a.name+" alarm", func() bool {
			results := make(chan result, 4)
			for range cap(results) {
				go func() {
					left, err := publish()
					results <- result{left, err}
				}()
			}
			for range cap(results) {
				if r := <-results; r.err != nil {
					failed = append(failed, r)
				}
			}
			return len(failed) > 0
		})
		for _, r := range failed {
			check(r.left, r.err)
		}
		for range 3 { // refused before publishing, without waiting for a confirm
			check(publish())
		}
		blockLine := "level=WARN msg=\"the broker blocked this connection"
		enginetest.WaitFor(t, 30*time.Second, "the block in the log", func() bool { return logs.count(blockLine) >= i+1 })
		if n := logs.count(blockLine); n != i+1 {
			t.Errorf("%s alarm: %d block warnings in the log, want %d (one per transition)", a.name, n, i+1)
		}

		b.ctl(a.set, a.off)
		enginetest.WaitFor(t, 2*time.Minute, "a publish after the "+a.name+" alarm cleared", func() bool {
			_, err := publish()
			return err == nil
		})
		for range 3 {
			if _, err := publish(); err != nil {
				t.Fatalf("%s alarm cleared: %v", a.name, err)
			}
		}
		if got := connections(); got != conn {
			t.Errorf("%s alarm cleared: connections %q, want the same one %q (no reconnect)", a.name, got, conn)
		}
		unblockLine := "level=INFO msg=\"the broker unblocked this connection"
		enginetest.WaitFor(t, 30*time.Second, "the unblock in the log", func() bool { return logs.count(unblockLine) >= i+1 })
		if n := logs.count(unblockLine); n != i+1 {
			t.Errorf("%s alarm cleared: %d unblock lines in the log, want %d", a.name, n, i+1)
		}
	}
}
