package metrics

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/dbcanary/dbcanary/probes"
)

// opSeries scrapes reg in the text format (what a Prometheus without native
// histograms stores) and counts the series whose op label is op.
func opSeries(t *testing.T, reg *prometheus.Registry, op string) (n int, lines []string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `op="`+op+`"`) && !strings.HasPrefix(l, "#") {
			n++
			lines = append(lines, l)
		}
	}
	return n, lines
}

func TestCompactSeriesOfAHealthyOp(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewWith(reg, Options{})
	o := m.ForOp("t", "cassandra", "read", nil)
	o.LatencyOK.Observe(0.002)
	o.ServiceOK.Observe(0.001)
	o.LastSuccess.Set(1)
	o.BytesReceived.Add(1024)
	n, lines := opSeries(t, reg, "read")
	// latency ok: 6 bounds + +Inf + sum + count; service time ok: +Inf, sum,
	// count; 4 eager causes; last success; bytes sent and received; expected
	// rate is set by the engine (not here).
	if want := 9 + 3 + len(EagerCauses) + 1 + 2; n != want {
		t.Errorf("%d series, want %d:\n%s", n, want, strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.Contains(l, "service_time_seconds_bucket") && !strings.Contains(l, `le="+Inf"`) {
			t.Errorf("service time has a classic bucket in compact mode: %s", l)
		}
	}

	// An error creates the error series, with the ok latency's bounds.
	o.LatencyErr.Observe(5.1)
	o.ServiceErr.Observe(5.1)
	o.Failure(probes.CauseTimeout).Inc()
	n2, _ := opSeries(t, reg, "read")
	if want := n + 9 + 3 + 1; n2 != want {
		t.Errorf("after an error: %d series, want %d", n2, want)
	}
}

func TestFullIsTheOldLayout(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewWith(reg, Options{Histograms: Full})
	m.ForOp("t", "cassandra", "read", nil)
	n, _ := opSeries(t, reg, "read")
	// four histograms × (31 bounds + +Inf + sum + count), 13 causes, last
	// success, bytes sent and received.
	if want := 4*(len(LatencyBuckets)+3) + len(probes.Causes) + 1 + 2; n != want {
		t.Errorf("full: %d series, want %d", n, want)
	}
}

func TestBoundsHaveAHigherBoundAboveEveryThreshold(t *testing.T) {
	if len(ThresholdBounds()) == 0 {
		t.Fatal("no threshold bounds from the shipped baseline file")
	}
	for key, thr := range ThresholdBounds() {
		parts := strings.SplitN(key, "/", 3)
		phase := ""
		if len(parts) == 3 {
			phase = parts[2]
		}
		b := Options{}.Bounds(parts[0], parts[1], phase)
		for _, x := range thr {
			i := -1
			for j, y := range b {
				if y == x {
					i = j
				}
			}
			if i < 0 || i == len(b)-1 {
				t.Errorf("%s: threshold bound %g missing or highest in %v", key, x, b)
			}
		}
	}
}

func TestDeleteTargetRemovesEveryLayout(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewWith(reg, Options{})
	m.ForOp("a", "cassandra", "read", nil)
	m.ForOp("a", "s3", "get_4KiB", []string{"first_byte", "last_byte"})
	m.DeleteTarget("a")
	for _, op := range []string{"read", "get_4KiB"} {
		if n, lines := opSeries(t, reg, op); n != 0 {
			t.Errorf("%s: %d series left:\n%s", op, n, strings.Join(lines, "\n"))
		}
	}
}

// TestFailureOfUnknownCause: a cause probes.Causes does not list counts as other.
func TestFailureOfUnknownCause(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewWith(reg, Options{})
	o := m.ForOp("t", "noop", "noop", nil)
	o.Failure("no-such-cause").Inc()
	o.Failure(probes.CauseOther).Inc()
	_, lines := opSeries(t, reg, "noop")
	want := `dbcanary_op_failures_total{backend="noop",cause="other",op="noop",target="t"} 2`
	if !slices.Contains(lines, want) {
		t.Errorf("no %q in:\n%s", want, strings.Join(lines, "\n"))
	}
}
