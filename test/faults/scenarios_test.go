//go:build integration

package faults

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/test/stack"
)

const (
	latencyToxic = 50 * time.Millisecond // the injected latency
	latencyTol   = 0.05                  // ±5 % of the expected shift
	windowsN     = 10                    // 10 one-second windows per phase
)

// perf and fail are the engine settings of the tests: perf for timing
// (10 ops/s, a timeout no stall reaches, a small in-flight bound that a
// stall fills), fail for failures (5 ops/s, 1 s timeout, a bound above
// rate x timeout so timed-out ops never queue into backlog).
var (
	perf = params{rate: 10, timeout: 5 * time.Second, maxInFlight: 4}
	fail = params{rate: 5, timeout: time.Second, maxInFlight: 8}
)

// testLatency: a downstream latency toxic of 50 ms delays every response
// once, so an op of n request/response round trips shifts by n x 50 ms.
//
// Method: the machine is shared, so its load drifts over seconds; baseline
// and faulted windows are therefore interleaved in pairs (1 s without the
// toxic, 1 s with it, each after a 300 ms settle so no op straddles a
// switch), 10 pairs at 10 ops/s. Each window's mean is exact (histogram
// sum/count deltas, no bucket error); the shift is the median over pairs of
// (faulted mean - baseline mean), which a GC pause or a neighbour's burst in
// one window cannot move. The native-histogram p50 of all faulted windows
// minus that of all baseline windows is reported too (checked only to the
// buckets' 9 % resolution).
func testLatency(t *testing.T, f *fixture) {
	sp := f.spec
	target := sp.name + "-latency"
	h := f.engine(t, target, perf)
	p := probe{t: t, h: h, target: target, op: sp.steady}
	waitUntil(t, 60*time.Second, "20 ok samples before measuring", func() bool { return p.ok() >= 20 })
	lat := p.l("op", sp.steady, "result", "ok")
	names := []string{"dbcanary_op_latency_seconds", "dbcanary_op_service_time_seconds"}
	short := map[string]string{names[0]: "latency", names[1]: "service time"}
	fail0 := p.failures("")

	window := func() map[string]hist {
		time.Sleep(300 * time.Millisecond)
		first := map[string]hist{}
		for _, n := range names {
			first[n] = snapshot(t, h, n, lat)
		}
		time.Sleep(time.Second)
		out := map[string]hist{}
		for _, n := range names {
			out[n] = snapshot(t, h, n, lat).sub(first[n])
		}
		return out
	}
	diffs := map[string][]float64{}
	var baseMeans, faultMeans = map[string][]float64{}, map[string][]float64{}
	baseAll, faultAll := map[string]hist{}, map[string]hist{}
	for range windowsN {
		b := window()
		f.toxic(t, "latency", "latency", "downstream", toxiproxy.Attributes{"latency": latencyToxic.Milliseconds()})
		fw := window()
		f.removeToxic(t, "latency")
		for _, n := range names {
			baseAll[n], faultAll[n] = baseAll[n].merge(b[n]), faultAll[n].merge(fw[n])
			if b[n].count == 0 || fw[n].count == 0 {
				continue
			}
			baseMeans[n] = append(baseMeans[n], b[n].mean())
			faultMeans[n] = append(faultMeans[n], fw[n].mean())
			diffs[n] = append(diffs[n], fw[n].mean()-b[n].mean())
		}
	}

	if d := p.failures("") - fail0; d != 0 {
		t.Errorf("%v ops failed under +50 ms latency (causes %v)", d, p.causes())
	}
	want := float64(sp.roundTrips) * latencyToxic.Seconds()
	for _, n := range names {
		shift, b, fm := median(diffs[n]), median(baseMeans[n]), median(faultMeans[n])
		nativeShift := faultAll[n].nativeQuantile(0.5) - baseAll[n].nativeQuantile(0.5)
		t.Logf("%s %s: %d pairs of 1 s windows (%d + %d samples): baseline median window mean %s (native p50 %s), +50 ms downstream %s (native p50 %s); median paired shift %s (want %s ±5 %%; per pair %s), native p50 shift %s",
			sp.steady, short[n], len(diffs[n]), baseAll[n].count, faultAll[n].count, ms(b), ms(baseAll[n].nativeQuantile(0.5)), ms(fm), ms(faultAll[n].nativeQuantile(0.5)),
			ms(shift), ms(want), msList(diffs[n]), ms(nativeShift))
		record(sp.name, "latency +50 ms downstream", sp.steady+" "+short[n]+" baseline → faulted (median 1 s window mean)", ms(b)+" → "+ms(fm))
		record(sp.name, "latency +50 ms downstream", sp.steady+" "+short[n]+" shift, median of 10 paired windows (want "+ms(want)+" ±5 %)", ms(shift))
		record(sp.name, "latency +50 ms downstream", sp.steady+" "+short[n]+" native-histogram p50 shift", ms(nativeShift))
		if baseAll[n].count < windowsN*5 || faultAll[n].count < windowsN*5 || len(diffs[n]) < windowsN-1 {
			t.Errorf("%s: too few samples (%d baseline, %d faulted, %d pairs) for a ±5 %% comparison", short[n], baseAll[n].count, faultAll[n].count, len(diffs[n]))
		}
		if math.Abs(shift-want) > latencyTol*want || math.IsNaN(shift) {
			t.Errorf("%s %s shifted by %s under a +50 ms toxic, want %s ±5 %%", sp.steady, short[n], ms(shift), ms(want))
		}
		if math.Abs(nativeShift-want) > 0.15*want || math.IsNaN(nativeShift) {
			t.Errorf("%s %s native-histogram p50 shifted by %s, want %s ±15 %% (bucket resolution)", sp.steady, short[n], ms(nativeShift), ms(want))
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := len(s)
	if k%2 == 1 {
		return s[k/2]
	}
	return (s[k/2-1] + s[k/2]) / 2
}

func msList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x*1000, 'f', 1, 64)
	}
	return "[" + strings.Join(parts, " ") + "] ms"
}

// testStall: all responses are held for 2 s (a latency toxic far longer
// than the window, removed after 2 s: Toxiproxy then releases what it held,
// nothing is dropped). At 10 ops/s every slot that fell into the stall gives
// one slow latency sample (no coordinated omission), while service time is
// slow only for the ops that were actually sent into the stall (at most
// max_in_flight); the rest waited in front of the in-flight bound.
func testStall(t *testing.T, f *fixture) {
	sp := f.spec
	target := sp.name + "-stall"
	h := f.engine(t, target, perf)
	p := probe{t: t, h: h, target: target, op: sp.steady}
	waitUntil(t, 60*time.Second, "20 ok samples before the stall", func() bool { return p.ok() >= 20 })
	lat, svc := p.l("op", sp.steady), p.l("op", sp.steady)
	inflight := sampleInFlight(t, h, target, sp.name)
	l0, s0, c0 := snapshot(t, h, "dbcanary_op_latency_seconds", lat), snapshot(t, h, "dbcanary_op_service_time_seconds", svc), p.causes()

	f.toxic(t, "stall", "latency", "downstream", toxiproxy.Attributes{"latency": 60000})
	t0 := time.Now()
	time.Sleep(2 * time.Second)
	f.removeToxic(t, "stall")
	stall := time.Since(t0)
	time.Sleep(2500 * time.Millisecond) // the held responses and the queued ops complete
	inflight.Stop()
	dl := snapshot(t, h, "dbcanary_op_latency_seconds", lat).sub(l0)
	ds := snapshot(t, h, "dbcanary_op_service_time_seconds", svc).sub(s0)
	causes := diffCauses(p.causes(), c0)

	slots := stall.Seconds() * perf.rate
	slow, over1, svcSlow := dl.above(0.1), dl.above(1), ds.above(0.1)
	t.Logf("stall %s at %g ops/s (%.1f slots): %s latency samples > 100 ms: %d, > 1 s: %d, > 2.5 s: %d; service time > 100 ms: %d; in-flight max %d (bound %d, %d samples); failures %v",
		roundDur(stall), perf.rate, slots, sp.steady, slow, over1, dl.above(2.5), svcSlow, inflight.max.Load(), perf.maxInFlight, inflight.samples.Load(), causes)
	record(sp.name, "stall 2 s at 10 ops/s", "latency samples > 100 ms / > 1 s (slots in the stall)", formatCounts(slow, over1, slots))
	record(sp.name, "stall 2 s at 10 ops/s", "service-time samples > 100 ms (in-flight bound)", formatCount(svcSlow, perf.maxInFlight))
	record(sp.name, "stall 2 s at 10 ops/s", "in-flight max (bound)", formatCount(uint64(inflight.max.Load()), perf.maxInFlight))

	// One slow sample per slot: every slot due 100 ms or more before the
	// stall ended waited at least 100 ms (±1 for the slot phase).
	if min := math.Floor((stall.Seconds()-0.1)*perf.rate) - 1; float64(slow) < min {
		t.Errorf("%d latency samples > 100 ms for a %s stall at %g ops/s, want >= %g (one per slot)", slow, roundDur(stall), perf.rate, min)
	}
	// A slot due x s into a stall of D s waits D - x: those due in the first
	// D - 1 s are >= 1 s.
	if min := math.Floor((stall.Seconds()-1)*perf.rate) - 1; float64(over1) < min {
		t.Errorf("%d latency samples > 1 s for a %s stall, want >= %g", over1, roundDur(stall), min)
	}
	if dl.above(2.5) != 0 {
		t.Errorf("%d latency samples > 2.5 s for a 2 s stall", dl.above(2.5))
	}
	if svcSlow == 0 || svcSlow > uint64(perf.maxInFlight)+1 {
		t.Errorf("%d service-time samples > 100 ms, want 1..%d: only ops sent into the stall are slow in service time", svcSlow, perf.maxInFlight+1)
	}
	if m := inflight.max.Load(); m > int64(perf.maxInFlight) || m < int64(perf.maxInFlight) {
		t.Errorf("in-flight max %d during the stall, want exactly the bound %d (reached, never exceeded)", m, perf.maxInFlight)
	}
	if len(causes) != 0 {
		t.Errorf("failures during a 2 s stall with a 5 s timeout: %v", causes)
	}
}

func formatCounts(a, b uint64, slots float64) string {
	return fmt.Sprintf("%d / %d (%.1f slots)", a, b, slots)
}

func formatCount(n uint64, bound int) string {
	if bound < 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%d)", n, bound)
}

// fmtF formats a count or rate without trailing zeros.
func fmtF(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// testBlackhole: responses are dropped (timeout toxic, timeout 0) for 4 s.
// Ops fail with cause timeout at the configured timeout, in-flight stays
// within its bound, target_up drops within one interval plus the timeout,
// and the probe recovers by itself once the toxic is removed.
func testBlackhole(t *testing.T, f *fixture) {
	sp := f.spec
	target := sp.name + "-blackhole"
	h := f.engine(t, target, fail)
	p := probe{t: t, h: h, target: target, op: sp.steady}
	waitUntil(t, 60*time.Second, "10 ok samples before the blackhole", func() bool { return p.ok() >= 10 && p.up() == 1 })
	inflight := sampleInFlight(t, h, target, sp.name)
	errL := p.l("result", "error")
	l0, s0, c0 := snapshot(t, h, "dbcanary_op_latency_seconds", errL), snapshot(t, h, "dbcanary_op_service_time_seconds", errL), p.causes()

	f.toxic(t, "blackhole", "timeout", "downstream", toxiproxy.Attributes{"timeout": 0})
	t0 := time.Now()
	down := waitUntil(t, 15*time.Second, "target_up 0 under the blackhole", func() bool { return p.up() == 0 })
	sleepUntil(t0.Add(4 * time.Second))
	dl := snapshot(t, h, "dbcanary_op_latency_seconds", errL).sub(l0)
	ds := snapshot(t, h, "dbcanary_op_service_time_seconds", errL).sub(s0)
	causes := diffCauses(p.causes(), c0)
	ok0 := p.ok()
	f.removeToxic(t, "blackhole")
	rec := waitUntil(t, 60*time.Second, "recovery after the blackhole", func() bool { return p.up() == 1 && p.ok() > ok0 })
	inflight.Stop()

	T := fail.timeout.Seconds()
	t.Logf("blackhole 4 s, timeout %s, %g ops/s: failures %v; error latency mean %s, error service time mean %s over %d samples; target_up 0 after %s (bound %s); in-flight max %d (bound %d); recovered %s after removal",
		fail.timeout, fail.rate, causes, ms(dl.mean()), ms(ds.mean()), dl.count, roundDur(down), fail.interval()+fail.timeout, inflight.max.Load(), fail.maxInFlight, roundDur(rec))
	record(sp.name, "blackhole (timeout toxic) 4 s, timeout 1 s", "failures by cause", causes)
	record(sp.name, "blackhole (timeout toxic) 4 s, timeout 1 s", "error latency / service time mean", ms(dl.mean())+" / "+ms(ds.mean()))
	record(sp.name, "blackhole (timeout toxic) 4 s, timeout 1 s", "target_up → 0 after (interval + timeout = "+(fail.interval()+fail.timeout).String()+")", down)
	record(sp.name, "blackhole (timeout toxic) 4 s, timeout 1 s", "in-flight max (bound)", formatCount(uint64(inflight.max.Load()), fail.maxInFlight))
	record(sp.name, "blackhole (timeout toxic) 4 s, timeout 1 s", "up again with a new ok op after removal", rec)

	if causes["timeout"] < 5 {
		t.Errorf("%v timeout failures in 4 s of blackhole at %g ops/s, want >= 5", causes["timeout"], fail.rate)
	}
	for c, n := range causes {
		if c != "timeout" {
			t.Errorf("%v failures with cause %s during the blackhole, want only timeout", n, c)
		}
	}
	if m := dl.mean(); !(m >= 0.97*T && m <= 1.15*T) {
		t.Errorf("error latency mean %s, want the timeout %s (-3 %%, +15 %%)", ms(m), fail.timeout)
	}
	if m := ds.mean(); !(m >= 0.97*T && m <= 1.15*T) {
		t.Errorf("error service time mean %s, want the timeout %s (-3 %%, +15 %%)", ms(m), fail.timeout)
	}
	if dl.above(2.5) != 0 {
		t.Errorf("%d error samples > 2.5 s with a 1 s timeout", dl.above(2.5))
	}
	if bound := fail.interval() + fail.timeout + time.Second; down > bound {
		t.Errorf("target_up dropped %s after the blackhole began, want within one interval + the timeout (+1 s polling slack): %s", roundDur(down), bound)
	}
	if m := inflight.max.Load(); m > int64(fail.maxInFlight) {
		t.Errorf("in-flight reached %d, above max_in_flight %d", m, fail.maxInFlight)
	}
}

// testResetAndCut: connections are reset (reset_peer toxic) for 5 s, then
// the proxy is disabled (listener closed, connections cut) for 6 s. Each
// time the probe fails with cause refused, reconnects by itself afterwards,
// and the connections it opens meanwhile stay bounded.
func testResetAndCut(t *testing.T, f *fixture) {
	sp := f.spec
	target := sp.name + "-reset"
	h := f.engine(t, target, fail)
	p := probe{t: t, h: h, target: target, op: sp.steady}
	waitUntil(t, 60*time.Second, "10 ok samples before the reset", func() bool { return p.ok() >= 10 && p.up() == 1 })

	phase := func(t *testing.T, name string, window time.Duration, start, stop func()) {
		p := p
		p.t = t
		a0, c0 := f.relay.Attempts(), p.causes()
		start()
		t0 := time.Now()
		down := waitUntil(t, 15*time.Second, "target_up 0 during "+name, func() bool { return p.up() == 0 })
		sleepUntil(t0.Add(window))
		attempts := f.relay.Attempts() - a0
		causes := diffCauses(p.causes(), c0)
		ok0 := p.ok()
		stop()
		rec := waitUntil(t, 60*time.Second, "recovery after "+name, func() bool { return p.up() == 1 && p.ok() > ok0 })
		// Without any backoff an op would dial triesPerOp times; with it, a
		// few dials per backoff period.
		noBackoff := window.Seconds() * (fail.rate + sp.otherRate) * float64(sp.triesPerOp)
		t.Logf("%s for %s: target_up 0 after %s, failures %v, %d connection attempts (%.1f/s; %g ops were due; one dial per op try would be %.0f), up again %s after the end",
			name, window, roundDur(down), causes, attempts, float64(attempts)/window.Seconds(), window.Seconds()*fail.rate, noBackoff, roundDur(rec))
		record(sp.name, name, "failures by cause", causes)
		record(sp.name, name, "connection attempts during the fault (ops due)", fmtF(float64(attempts))+" ("+fmtF(window.Seconds()*(fail.rate+sp.otherRate))+")")
		record(sp.name, name, "target_up → 0 after", down)
		record(sp.name, name, "up again with a new ok op after the end", rec)
		if causes["refused"] == 0 {
			t.Errorf("%s: no failure with cause refused (%v)", name, causes)
		}
		if causes["server"] > 0 {
			t.Errorf("%s: %v failures with cause server for a TCP reset or hang-up (want refused)", name, causes["server"])
		}
		if float64(attempts) > noBackoff+3 {
			t.Errorf("%s: %d connection attempts in %s: more than one per op try (%.0f)", name, attempts, window, noBackoff)
		}
		if sp.dialBound != nil {
			if bound := sp.dialBound(window); float64(attempts) > bound {
				t.Errorf("%s: %d connection attempts in %s, want <= %.0f (%s)", name, attempts, window, bound, sp.dialModel)
			}
		}
		if bound := 2*fail.interval() + sp.maxBackoff + 5*time.Second; rec > bound {
			t.Errorf("%s: up again %s after the end, want within 2 intervals + the probe's backoff cap %s + the engine's prepare backoff 5 s: %s", name, roundDur(rec), sp.maxBackoff, bound)
		}
	}
	t.Run("reset_peer", func(t *testing.T) {
		phase(t, "reset_peer 5 s", 5*time.Second,
			func() { f.toxic(t, "reset", "reset_peer", "downstream", toxiproxy.Attributes{"timeout": 0}) },
			func() { f.removeToxic(t, "reset") })
	})
	t.Run("cut", func(t *testing.T) {
		phase(t, "cut (proxy disabled) 6 s", 6*time.Second,
			func() {
				if err := f.proxy.Disable(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = f.proxy.Enable() })
			},
			func() {
				if err := f.proxy.Enable(); err != nil {
					t.Fatal(err)
				}
			})
	})
}

// testOutage stops the real server and starts it again while a scraper reads
// /metrics every second over HTTP: no scrape fails, the target goes down and
// comes back up without restarting dbcanary.
func testOutage(t *testing.T, f *fixture) {
	sp := f.spec
	target := sp.name + "-outage"
	h := f.engine(t, target, fail)
	p := probe{t: t, h: h, target: target, op: sp.steady}
	waitUntil(t, 60*time.Second, "10 ok samples before the outage", func() bool { return p.ok() >= 10 && p.up() == 1 })
	sc := startScraper(t, h, target)
	time.Sleep(1500 * time.Millisecond)

	tStop := time.Now()
	stopped := true
	t.Cleanup(func() {
		if stopped {
			if err := stack.Restart(sp.stack); err != nil {
				t.Errorf("restarting %s: %v", sp.stack, err)
			}
		}
	})
	if err := stack.Stop(sp.stack); err != nil {
		t.Fatalf("stopping %s: %v", sp.stack, err)
	}
	stopTook := time.Since(tStop)
	down := waitUntil(t, 60*time.Second, "target_up 0 with the server stopped", func() bool { return p.up() == 0 })
	downCauses := p.causes()
	time.Sleep(2 * time.Second) // a few failed ops while it is down
	tStart := time.Now()
	if err := stack.Restart(sp.stack); err != nil {
		t.Fatalf("restarting %s: %v", sp.stack, err)
	}
	stopped = false
	ready := time.Now()
	rec := waitUntil(t, 180*time.Second, "target up again with a new success", func() bool {
		return p.up() == 1 && p.lastSuccess() > float64(ready.UnixNano())/1e9
	})
	time.Sleep(1500 * time.Millisecond)
	sc.Stop()
	scrapedUp, seen := sc.firstScrape(ready, 1)

	t.Logf("outage of %s: stop took %s, target_up 0 %s after the stop began (causes so far %v); server ready %s after start; target up with a new ok op %s after the server was ready (scraped up %s after ready); scrapes ok %d, failed %d (last error %v)",
		sp.stack, roundDur(stopTook), roundDur(down), downCauses, roundDur(ready.Sub(tStart)), roundDur(rec), roundDur(scrapedUp.Sub(ready)), sc.ok.Load(), sc.failed.Load(), sc.lastErr)
	record(sp.name, "server stopped and restarted", "target_up → 0 after the stop began (stop took)", roundDur(down).String()+" ("+roundDur(stopTook).String()+")")
	record(sp.name, "server stopped and restarted", "server start until ready (stack script)", ready.Sub(tStart))
	record(sp.name, "server stopped and restarted", "up with a new ok op after the server was ready (2 intervals = "+(2*fail.interval()).String()+")", rec)
	record(sp.name, "server stopped and restarted", "scrapes ok / failed", fmtF(float64(sc.ok.Load()))+" / "+fmtF(float64(sc.failed.Load())))

	if n := sc.failed.Load(); n != 0 {
		t.Errorf("%d scrapes of /metrics failed during the outage (last: %v)", n, sc.lastErr)
	}
	if want := int64(time.Since(tStop).Seconds()) - 3; sc.ok.Load() < want {
		t.Errorf("%d successful scrapes over %s, want >= %d (one per second)", sc.ok.Load(), roundDur(time.Since(tStop)), want)
	}
	if !seen {
		t.Errorf("the scraper never saw target_up 1 after the server came back")
	}
	if bound := 2*fail.interval() + sp.maxBackoff + 5*time.Second + 5*time.Second; rec > bound {
		t.Errorf("up again %s after the server was ready, want within 2 intervals + the probe's backoff cap %s + the engine's prepare backoff 5 s (+5 s slack): %s", roundDur(rec), sp.maxBackoff, bound)
	}
}
