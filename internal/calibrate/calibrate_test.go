package calibrate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/all"
)

const cfgYAML = `
global: {instance_id: c}
targets:
  - {name: mq-a, backend: rabbitmq, ops: {publish: {rate: 1}, consume: {}}, rabbitmq: {url: "amqp://127.0.0.1:5672/", username: u, password_env: PW}}
  - {name: s3.a, backend: s3, ops: {get_4KiB: {rate: 1}}, s3: {endpoint: "http://127.0.0.1:9000", access_key_id_env: A, secret_access_key_env: S}}
  - {name: floor, backend: noop}
`

func record(r *Recorder, target, op string, n int, lat func(i int) time.Duration, phases ...string) {
	t0 := time.Unix(1700000000, 0)
	for i := range n {
		s := engine.Sample{Target: target, Op: op, Intended: t0, Sent: t0, End: t0.Add(lat(i))}
		for _, p := range phases {
			s.Phases = append(s.Phases, probes.Phase{Name: p, Duration: lat(i) / 2})
		}
		r.Record(s)
	}
}

// The written file holds each target's own p50/p90/p99 with sample counts,
// alerts only on p99 of ops the generator knows with enough samples, loads
// back, and yields thresholds from the measured figures for that target.
func TestBuildRoundTrip(t *testing.T) {
	t.Setenv("PW", "x")
	t.Setenv("A", "x")
	t.Setenv("S", "x")
	cfg, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(cfg)
	ms := func(v float64) func(int) time.Duration {
		return func(i int) time.Duration { return time.Duration(v * float64(i+1) / 200 * float64(time.Millisecond)) }
	}
	record(r, "mq-a", "publish", 200, ms(4)) // 0.02..4 ms: p99 3.96 ms
	record(r, "mq-a", "consume", 50, ms(2))  // too few for an alert
	record(r, "s3.a", "get_4KiB", 400, ms(20), "first_byte", "last_byte")
	record(r, "floor", "noop", 300, ms(1)) // no rules for noop
	r.Record(engine.Sample{Target: "mq-a", Op: "publish", Intended: time.Unix(0, 0), End: time.Unix(0, 0).Add(5 * time.Second), Err: probes.Fail(probes.CauseTimeout, errors.New("t"))})

	c := Conditions{Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Duration: 10 * time.Minute, Config: cfg, Version: "v-test", Host: "h", Notes: "RabbitMQ 3.10.8"}
	b, warnings, err := r.Build(c, Options{Warning: 2, Critical: 5})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "mq-a publish: 1 of 201 ops failed (timeout 1)") || !strings.Contains(w, "mq-a consume: only 50 samples") {
		t.Errorf("warnings:\n%s", w)
	}
	data, err := Marshal(b, c, "dbcanary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	back, err := baseline.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	use := map[string]string{}
	for _, f := range back.Figures {
		use[f.ID] = f.Use
		if len(f.Targets) != 1 || f.Samples == 0 || f.Source != SourceID {
			t.Errorf("figure %s: targets %v samples %d source %s", f.ID, f.Targets, f.Samples, f.Source)
		}
	}
	for id, want := range map[string]string{
		"mq-a-publish-p50": "reference", "mq-a-publish-p99": "alert", "mq-a-consume-p99": "reference",
		"s3-a-get-4kib-first-byte-p99": "alert", "s3-a-get-4kib-last-byte-p90": "reference", "s3-a-get-4kib-p99": "alert",
		"floor-noop-p99": "reference",
	} {
		if use[id] != want {
			t.Errorf("figure %s: use %q, want %q (figures: %v)", id, use[id], want, use)
		}
	}
	if !strings.Contains(string(data), "RabbitMQ 3.10.8") || !strings.Contains(string(data), "publish 1/s") {
		t.Errorf("conditions missing from the file:\n%s", data)
	}
	th, err := generate.Thresholds(back)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, x := range th {
		got[x.Target+" "+x.Op+" "+x.Phase+" "+x.Severity] = x.Bound
	}
	// publish p99 ≈ 3.98 ms (the timeout sample is 1 in 201: above the p99 rank):
	// ×2 = 7.96 ms → 8 ms bound, ×5 = 19.9 ms → 23 ms.
	for k, want := range map[string]float64{"mq-a publish  warning": 0.008, "mq-a publish  critical": 0.023} {
		if got[k] != want {
			t.Errorf("threshold %s = %g, want %g (all: %v)", k, got[k], want, got)
		}
	}
	if len(th) != 8 { // publish, get_4KiB and its first_byte and last_byte: warning and critical each
		t.Errorf("%d thresholds, want 8: %v", len(th), got)
	}
}

// Both thresholds of a fast op would snap onto the same lowest bound: the
// critical factor is raised for that figure until they differ.
func TestFastOpGetsTwoThresholds(t *testing.T) {
	t.Setenv("PW", "x")
	cfg, err := config.Parse([]byte("targets:\n  - {name: mq, backend: rabbitmq, rabbitmq: {url: \"amqp://127.0.0.1:5672/\", username: u, password_env: PW}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(cfg)
	record(r, "mq", "publish", 200, func(int) time.Duration { return 90 * time.Microsecond })
	b, _, err := r.Build(Conditions{Config: cfg, Duration: time.Minute}, Options{Warning: 2, Critical: 5})
	if err != nil {
		t.Fatal(err)
	}
	th, err := generate.Thresholds(b)
	if err != nil || len(th) != 2 || th[1].Bound <= th[0].Bound {
		t.Fatalf("thresholds %+v, %v", th, err)
	}
}

// Target names that read alike as figure ids get ids of their own.
func TestFigureIDsUnique(t *testing.T) {
	cfg, err := config.Parse([]byte("targets:\n  - {name: a.b, backend: noop}\n  - {name: a-b, backend: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(cfg)
	record(r, "a.b", "noop", 10, func(int) time.Duration { return time.Millisecond })
	record(r, "a-b", "noop", 10, func(int) time.Duration { return time.Millisecond })
	if _, _, err := r.Build(Conditions{Config: cfg, Duration: time.Minute}, Options{Warning: 2, Critical: 5}); err != nil {
		t.Fatal(err)
	}
}
