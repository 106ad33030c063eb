package status

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/probes"
)

var _ engine.Observer = (*Store)(nil)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

func newTestStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	return New(Options{Now: c.now}), c
}

func opOf(t *testing.T, s *Store, target, op string) OpStatus {
	t.Helper()
	for _, ts := range s.Snapshot().Targets {
		if ts.Name != target {
			continue
		}
		for _, o := range ts.Ops {
			if o.Name == op {
				return o
			}
		}
	}
	t.Fatalf("no op %s/%s in the snapshot", target, op)
	return OpStatus{}
}

func targetOf(t *testing.T, s *Store, name string) TargetStatus {
	t.Helper()
	for _, ts := range s.Snapshot().Targets {
		if ts.Name == name {
			return ts
		}
	}
	t.Fatalf("no target %s in the snapshot", name)
	return TargetStatus{}
}

func refused(msg string) error { return probes.Fail(probes.CauseRefused, errors.New(msg)) }

func TestStates(t *testing.T) {
	s, c := newTestStore(t)
	s.TargetStarted("mq", "rabbitmq", []string{"publish", "consume"}, "queue dbcanary.x")
	ts := targetOf(t, s, "mq")
	if ts.State != StateNotYetRun || ts.Namespace != "queue dbcanary.x" || ts.Backend != "rabbitmq" || len(ts.Ops) != 2 {
		t.Fatalf("fresh target: %+v", ts)
	}
	for _, o := range ts.Ops {
		if o.State != StateNotYetRun || !o.Since.IsZero() || !o.LastSuccess.IsZero() {
			t.Errorf("fresh op: %+v", o)
		}
	}

	t1 := c.advance(time.Second)
	s.OpRecorded("mq", "rabbitmq", "publish", t1, 3*time.Millisecond, "", nil)
	if st := targetOf(t, s, "mq").State; st != StateOK {
		t.Errorf("one op ok, one not yet run: target %s, want ok", st)
	}
	t2 := c.advance(time.Second)
	s.OpRecorded("mq", "rabbitmq", "publish", t2, 0, probes.CauseRefused, refused("dial tcp 127.0.0.1:5672: connection refused"))
	t3 := c.advance(time.Second)
	s.OpRecorded("mq", "rabbitmq", "publish", t3, 0, probes.CauseRefused, refused("dial tcp 127.0.0.1:5672: connection refused"))
	o := opOf(t, s, "mq", "publish")
	if o.State != StateFailing || !o.Since.Equal(t2) || !o.LastSuccess.Equal(t1) || !o.LastFailure.Equal(t3) || o.LastCause != probes.CauseRefused {
		t.Errorf("failing op: %+v", o)
	}
	if st := targetOf(t, s, "mq").State; st != StateFailing {
		t.Errorf("target %s, want failing", st)
	}
	t4 := c.advance(time.Second)
	s.OpRecorded("mq", "rabbitmq", "publish", t4, time.Millisecond, "", nil)
	o = opOf(t, s, "mq", "publish")
	if o.State != StateOK || !o.Since.Equal(t4) || !o.LastSuccess.Equal(t4) {
		t.Errorf("recovered op: %+v", o)
	}
	if o.Runs != 4 || o.Failures != 2 || len(o.Causes) != 1 || o.Causes[0] != (CauseCount{probes.CauseRefused, 2}) {
		t.Errorf("window counts: runs %d failures %d causes %v", o.Runs, o.Failures, o.Causes)
	}
	if len(o.Errors) != 1 || o.Errors[0].Count != 2 || !o.Errors[0].First.Equal(t2) || !o.Errors[0].Last.Equal(t3) {
		t.Errorf("repeats of one message fold into one entry: %+v", o.Errors)
	}
	// Samples for unknown targets and ops are ignored, not created.
	s.OpRecorded("nope", "noop", "noop", t4, 0, "", nil)
	s.OpRecorded("mq", "rabbitmq", "nope", t4, 0, "", nil)
	if n := len(s.Snapshot().Targets); n != 1 || len(targetOf(t, s, "mq").Ops) != 2 {
		t.Errorf("unknown target or op created state")
	}
}

func TestFailureWindowByCause(t *testing.T) {
	s, c := newTestStore(t)
	s.TargetStarted("a", "noop", []string{"noop"}, "")
	// One failure per minute for 15 minutes, alternating causes, one success per minute.
	for i := range 15 {
		now := c.advance(time.Minute)
		cause := probes.CauseTimeout
		if i%2 == 1 {
			cause = probes.CauseAuth
		}
		s.OpRecorded("a", "noop", "noop", now, 0, cause, probes.Fail(cause, fmt.Errorf("failure %d", i)))
		s.OpRecorded("a", "noop", "noop", now, time.Millisecond, "", nil)
	}
	o := opOf(t, s, "a", "noop")
	// The window holds the current minute and the 9 before: minutes 6..15 (i = 5..14).
	if o.Failures != 10 || o.Runs != 20 {
		t.Fatalf("failures %d runs %d, want 10 and 20 in a 10-minute window", o.Failures, o.Runs)
	}
	want := []CauseCount{{probes.CauseTimeout, 5}, {probes.CauseAuth, 5}}
	if fmt.Sprint(o.Causes) != fmt.Sprint(want) {
		t.Errorf("causes %v, want %v (fixed cause order)", o.Causes, want)
	}
	// Every cause of the fixed set has its own counter, in the set's order.
	s.TargetStarted("every", "noop", []string{"noop"}, "")
	for _, cause := range probes.Causes {
		s.OpRecorded("every", "noop", "noop", c.now(), 0, cause, probes.Fail(cause, errors.New(string(cause))))
	}
	if got := opOf(t, s, "every", "noop").Causes; len(got) != len(probes.Causes) {
		t.Errorf("causes %v, want one of each of %v", got, probes.Causes)
	} else {
		for i, cc := range got {
			if cc != (CauseCount{probes.Causes[i], 1}) {
				t.Errorf("cause %d: %v, want %s 1", i, cc, probes.Causes[i])
			}
		}
	}
	// An unknown cause counts as other.
	s.OpRecorded("a", "noop", "noop", c.now(), 0, "weird", errors.New("x"))
	if o := opOf(t, s, "a", "noop"); o.Causes[len(o.Causes)-1] != (CauseCount{probes.CauseOther, 1}) {
		t.Errorf("unknown cause: %v", o.Causes)
	}
	// A quiet op's window empties.
	c.advance(11 * time.Minute)
	if o := opOf(t, s, "a", "noop"); o.Failures != 0 || o.Runs != 0 || len(o.Causes) != 0 || o.State != StateFailing {
		t.Errorf("after the window: %+v", o)
	}
	if s2 := New(Options{FailureWindow: 3 * time.Minute}); s2.FailureWindow() != 3*time.Minute {
		t.Errorf("window option: %s", s2.FailureWindow())
	}
	if s2 := New(Options{FailureWindow: 24 * time.Hour}); s2.FailureWindow() != time.Hour {
		t.Errorf("window is capped at an hour: %s", s2.FailureWindow())
	}
}

func TestMessagesBounded(t *testing.T) {
	s, c := newTestStore(t)
	s.TargetStarted("a", "noop", []string{"noop"}, "")
	long := strings.Repeat("é", MaxMessageBytes) // 2 bytes a rune: the cut must not split one
	for i := range 1000 {
		now := c.advance(time.Millisecond)
		s.OpRecorded("a", "noop", "noop", now, 0, probes.CauseServer, probes.Fail(probes.CauseServer, fmt.Errorf("error %04d %s", i, long)))
	}
	o := opOf(t, s, "a", "noop")
	if len(o.Errors) != MaxMessages {
		t.Fatalf("%d messages kept, want %d", len(o.Errors), MaxMessages)
	}
	for i, e := range o.Errors {
		if want := fmt.Sprintf("error %04d ", 999-i); !strings.HasPrefix(e.Message, want) {
			t.Errorf("message %d = %.20q..., want %q first (newest first)", i, e.Message, want)
		}
		if len(e.Message) > MaxMessageBytes+len("…") || !strings.HasSuffix(e.Message, "…") || !utf8.ValidString(e.Message) || e.Count != 1 {
			t.Errorf("message %d: %d bytes, count %d", i, len(e.Message), e.Count)
		}
	}
}

// TestMemoryBoundedPerOp records a flood of distinct error messages and
// latencies: the store must not grow with them.
func TestMemoryBoundedPerOp(t *testing.T) {
	s, c := newTestStore(t)
	s.TargetStarted("a", "noop", []string{"noop"}, "")
	flood := func(n int) {
		for i := range n {
			now := c.advance(time.Millisecond)
			if i%3 == 0 {
				s.OpRecorded("a", "noop", "noop", now, time.Duration(i)*time.Microsecond, "", nil)
				continue
			}
			s.OpRecorded("a", "noop", "noop", now, 0, probes.CauseTimeout, probes.Fail(probes.CauseTimeout, fmt.Errorf("distinct %d %s", i, strings.Repeat("x", 300))))
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	flood(1000)
	before := heap()
	flood(200000) // ~60 MB of error text if it were kept
	after := heap()
	if after > before+256<<10 {
		t.Errorf("heap grew by %d KiB over 200k samples: the per-op state is not bounded", (after-before)>>10)
	}
	runtime.KeepAlive(s)
}

func TestLatencyWindow(t *testing.T) {
	s, c := newTestStore(t)
	s.TargetStarted("a", "noop", []string{"noop"}, "")
	if o := opOf(t, s, "a", "noop"); o.Latency.Samples != 0 || o.Latency.P50 != 0 {
		t.Errorf("empty window: %+v", o.Latency)
	}
	// 1000 samples 1..1000 ms: p50 = 500 ms, p99 = 990 ms, within a bucket (~10%).
	for i := 1; i <= 1000; i++ {
		s.OpRecorded("a", "noop", "noop", c.advance(100*time.Millisecond), time.Duration(i)*time.Millisecond, "", nil)
	}
	// Failures do not count in the latency window.
	s.OpRecorded("a", "noop", "noop", c.now(), time.Hour, probes.CauseTimeout, probes.Fail(probes.CauseTimeout, errors.New("slow")))
	l := opOf(t, s, "a", "noop").Latency
	if l.Samples != 1000 {
		t.Fatalf("samples %d, want 1000 (100 s of samples, a 5-minute window)", l.Samples)
	}
	near := func(name string, got, want time.Duration) {
		if d := float64(got-want) / float64(want); d < -0.1 || d > 0.1 {
			t.Errorf("%s = %s, want %s ±10%%", name, got, want)
		}
	}
	near("p50", l.P50, 500*time.Millisecond)
	near("p99", l.P99, 990*time.Millisecond)
	if l.Max != time.Second || l.MaxSeconds != 1 || l.P50Seconds != l.P50.Seconds() {
		t.Errorf("max %s / %g s, p50 %g s", l.Max, l.MaxSeconds, l.P50Seconds)
	}
	// One sample: p50 = p99 = the sample exactly (clamped to min/max).
	s.TargetStarted("b", "noop", []string{"noop"}, "")
	s.OpRecorded("b", "noop", "noop", c.now(), 1234*time.Microsecond, "", nil)
	if l := opOf(t, s, "b", "noop").Latency; l.P50 != 1234*time.Microsecond || l.P99 != 1234*time.Microsecond {
		t.Errorf("single sample: %+v", l)
	}
	// Extremes land in the end buckets.
	s.OpRecorded("b", "noop", "noop", c.now(), time.Nanosecond, "", nil)
	s.OpRecorded("b", "noop", "noop", c.now(), 100*time.Hour, "", nil)
	if l := opOf(t, s, "b", "noop").Latency; l.Samples != 3 || l.Max != 100*time.Hour {
		t.Errorf("extremes: %+v", l)
	}
	// Five minutes later the window is empty again.
	c.advance(LatencyWindow)
	if l := opOf(t, s, "a", "noop").Latency; l.Samples != 0 {
		t.Errorf("after the window: %+v", l)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"dial tcp 127.0.0.1:5672: connection refused", "dial tcp 127.0.0.1:5672: connection refused"},
		{`Exception (403) Reason: "username or password not allowed"`, `Exception (403) Reason: "username or password not allowed"`},
		{"parse amqp://guest:hunter2@127.0.0.1:5672/: bad", "parse amqp://guest:xxxxx@127.0.0.1:5672/: bad"},
		{"GET https://u:p%40ss@h/x and http://a:b@c", "GET https://u:xxxxx@h/x and http://a:xxxxx@c"},
		{"mail me@example.com about amqp://host/", "mail me@example.com about amqp://host/"},
		{"line one\nline two\tend", "line one line two end"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Redact(strings.Repeat("a", 2*MaxMessageBytes)); got != strings.Repeat("a", MaxMessageBytes)+"…" {
		t.Errorf("long message: %d bytes", len(got))
	}
	// The stored message is redacted too.
	s, c := newTestStore(t)
	s.TargetStarted("a", "noop", []string{"noop"}, "")
	s.OpRecorded("a", "noop", "noop", c.now(), 0, probes.CauseAuth, errors.New("amqp://dbcanary:SECRETvalue@127.0.0.1/ refused"))
	if m := opOf(t, s, "a", "noop").Errors[0].Message; strings.Contains(m, "SECRETvalue") {
		t.Errorf("stored message holds the password: %q", m)
	}
	s.ConfigLoaded(errors.Join(errors.New("targets[0].rabbitmq.url: must not contain credentials"), errors.New("x://u:SECRETvalue@h")))
	if r := s.Snapshot().Daemon.Reload; r.Success || strings.Contains(r.Error, "SECRETvalue") || !strings.Contains(r.Error, "must not contain credentials; ") {
		t.Errorf("reload error: %+v", r)
	}
}

func TestRestartKeepsHistoryStopRemoves(t *testing.T) {
	s, c := newTestStore(t)
	s.TargetStarted("a", "noop", []string{"x", "y"}, "ns1")
	s.OpRecorded("a", "noop", "x", c.now(), 0, probes.CauseRefused, refused("down"))
	s.TargetStarted("a", "noop", []string{"x", "z"}, "ns2") // a reload changed the target
	ts := targetOf(t, s, "a")
	if ts.Namespace != "ns2" || len(ts.Ops) != 2 || ts.Ops[0].State != StateFailing || ts.Ops[1].Name != "z" || ts.Ops[1].State != StateNotYetRun {
		t.Errorf("restarted target: %+v", ts)
	}
	s.TargetStarted("a", "other", []string{"x"}, "") // another backend: a new target
	if o := opOf(t, s, "a", "x"); o.State != StateNotYetRun {
		t.Errorf("backend changed: history kept: %+v", o)
	}
	s.TargetStopped("a")
	s.TargetStopped("a")
	if n := len(s.Snapshot().Targets); n != 0 {
		t.Errorf("%d targets after stop", n)
	}
}

func TestSnapshotSummaryAndOrder(t *testing.T) {
	s, c := newTestStore(t)
	s.SetDaemon(Daemon{Build: BuildInfo{Version: "1.2.3", GoVersion: "go1.26"}, InstanceID: "inst", Shard: Shard{Index: 1, Count: 3}})
	s.ConfigLoaded(nil)
	for _, n := range []string{"c-ok", "a-failing", "b-new", "d-ok"} {
		s.TargetStarted(n, "noop", []string{"noop"}, "")
	}
	s.OpRecorded("c-ok", "noop", "noop", c.now(), 0, "", nil)
	s.OpRecorded("d-ok", "noop", "noop", c.now(), 0, "", nil)
	s.OpRecorded("a-failing", "noop", "noop", c.now(), 0, probes.CauseServer, errors.New("boom"))
	snap := s.Snapshot()
	if snap.Summary != (Summary{Targets: 4, OK: 2, Failing: 1, NotYetRun: 1}) {
		t.Errorf("summary %+v", snap.Summary)
	}
	if d := snap.Daemon; d.InstanceID != "inst" || d.Build.Version != "1.2.3" || d.Shard.Count != 3 || !d.Reload.Success || d.Started.IsZero() {
		t.Errorf("daemon %+v", d)
	}
	var names []string
	for _, t := range snap.Targets {
		names = append(names, t.Name)
	}
	if got := strings.Join(names, " "); got != "a-failing b-new c-ok d-ok" {
		t.Errorf("snapshot order %s", got)
	}
	s.OpRecorded("a-failing", "noop", "noop", c.now(), 0, "", nil)
	s.OpRecorded("b-new", "noop", "noop", c.now(), 0, probes.CauseServer, errors.New("boom"))
	snap = s.Snapshot()
	snap.SortForPage()
	names = names[:0]
	for _, t := range snap.Targets {
		names = append(names, t.Name)
	}
	if got := strings.Join(names, " "); got != "b-new a-failing c-ok d-ok" {
		t.Errorf("page order %s", got)
	}
	if f := snap.Failing(); len(f) != 1 || f[0].Name != "b-new" {
		t.Errorf("failing %v", f)
	}
}

// TestConcurrent runs samples, renders and reloads at once (meant for -race).
func TestConcurrent(t *testing.T) {
	s := New(Options{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if i%2 == 0 {
					err = refused(fmt.Sprint("e", i%7))
				}
				s.OpRecorded(fmt.Sprint("t", (w+i)%5), "noop", "noop", time.Now(), time.Millisecond, "", err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				s.TargetStarted(fmt.Sprint("t", i%5), "noop", []string{"noop"}, "")
			} else {
				s.TargetStopped(fmt.Sprint("t", i%5))
			}
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		_ = s.Snapshot()
	}
	close(stop)
	wg.Wait()
}
