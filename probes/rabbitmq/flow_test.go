package rabbitmq

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/probes"
)

// TestFlowLogsOncePerTransition: repeated connection.blocked or unblocked
// notifications log nothing more; each transition logs one line, the block
// at warn with the broker's reason.
func TestFlowLogsOncePerTransition(t *testing.T) {
	var logs bytes.Buffer
	p := &Probe{urls: []string{"amqp://127.0.0.1:5672/"}, logger: slog.New(slog.NewTextHandler(&logs, nil))}
	f := newFlow()
	notes := make(chan amqp.Blocking, 8)
	for _, b := range []amqp.Blocking{
		{Active: true, Reason: "low on memory"}, {Active: true, Reason: "low on memory"},
		{Active: false}, {Active: false},
		{Active: true, Reason: "low on disk"},
	} {
		notes <- b
	}
	close(notes)
	p.wg.Add(1)
	p.watchFlow(f, notes)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 log lines (blocked, unblocked, blocked), got:\n%s", logs.String())
	}
	for i, want := range []string{"level=WARN", "level=INFO", "level=WARN"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: want %s: %s", i, want, lines[i])
		}
	}
	if !strings.Contains(lines[0], "broker blocked publishing: low on memory (connection.blocked, a memory or disk alarm: rabbitmq-diagnostics alarms") {
		t.Errorf("the warning does not give the broker's reason: %s", lines[0])
	}
	if !strings.Contains(lines[2], "low on disk") {
		t.Errorf("the second block's reason: %s", lines[2])
	}
	if r, _ := f.state(); r != "low on disk" {
		t.Errorf("state after the notifications: %q", r)
	}
}

// TestBlockEndsConfirmWait: an op waiting for a confirm when the broker blocks
// the connection ends at once with cause server and the broker's reason, not
// at its deadline; while blocked, a new op is refused before it publishes;
// after the unblock it is not.
func TestBlockEndsConfirmWait(t *testing.T) {
	p := &Probe{urls: []string{"amqp://127.0.0.1:5672/"}, logger: slog.New(slog.DiscardHandler)}
	f := newFlow()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p.waitConfirm(ctx, new(amqp.DeferredConfirmation), f) // never confirmed
		done <- err
	}()
	f.set(amqp.Blocking{Active: true, Reason: "low on memory"}, time.Now())
	err := <-done
	if ctx.Err() != nil || probes.CauseOf(err) != probes.CauseServer || !strings.Contains(err.Error(), "broker blocked publishing: low on memory") {
		t.Fatalf("wait ended with %v (cause %q), context %v", err, probes.CauseOf(err), ctx.Err())
	}
	if err := p.refuseBlocked(f); probes.CauseOf(err) != probes.CauseServer {
		t.Errorf("a publish while blocked: %v", err)
	}
	if changed, _ := f.set(amqp.Blocking{Active: false}, time.Now()); !changed {
		t.Error("unblock not a transition")
	}
	if err := p.refuseBlocked(f); err != nil {
		t.Errorf("a publish after the unblock: %v", err)
	}
	// Unblocked, a wait ends at the op's own deadline as before.
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if _, err := p.waitConfirm(short, new(amqp.DeferredConfirmation), f); err != context.Canceled {
		t.Errorf("unblocked wait: %v, want the context's error", err)
	}
}
