//go:build linux

package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/hist"
	"github.com/dbcanary/dbcanary/internal/scheduler"
	_ "github.com/dbcanary/dbcanary/probes/noop"
)

// BenchmarkFloor shows where the latency floor of an open-loop schedule at a
// canary rate (10 ops/s) goes, with figures: how late a wake-up is with a Go
// timer (alone, and handed to another goroutine: what the engine did before
// it used scheduler.Waiter), with a Go timer that stops 2 ms short followed by
// a nanosleep of the rest on a thread with 1 ns timer slack (the prototype),
// the same plus the hand-off, and scheduler.Waiter (what the engine's workers
// use now: the prototype with a bound on the threads in nanosleep and a
// learnt early wake-up + short spin; alone, and with the hand-off it avoids
// by starting the op on the waking goroutine). Then the engine itself running
// the noop probe, latency from the slot beside service time: in load mode
// (`dbcanary bench`, the open loop of engine.Load) and on the daemon's own
// scheduler (engine.RunScheduled, the path of `dbcanary run`). CPU is the
// process's user+system time over the wall time, in % of a core.
//
//	go test -run '^$' -bench Floor -benchtime 1x ./test/bench/     (FLOOR_OPS=100 per variant)
//
// Go's netpoller sleeps in whole milliseconds (runtime/netpoll_epoll.go: a
// wait under 1 ms becomes 1 ms, longer ones are truncated to ms and then
// topped up with another 1 ms wait), so a timer due at a random sub-ms
// offset fires late by a uniform 0..1 ms: p50 ~0.5 ms, p90 ~0.9 ms.
func BenchmarkFloor(b *testing.B) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("FLOOR_OPS")); err == nil && v > 0 {
		n = v
	}
	const interval = 100 * time.Millisecond
	b.Logf("load average before: %s", loadavg())
	for range b.N {
		for _, v := range []struct {
			name string
			wait func(timer *time.Timer, t time.Time)
			hand bool
		}{
			{"go-timer", waitTimer, false},
			{"go-timer+handoff", waitTimer, true}, // the engine before the Waiter
			{"timer+nanosleep", waitFine, false},
			{"timer+nanosleep+handoff", waitFine, true},
			{"scheduler.Waiter", waitWaiter(), false}, // the engine now: the op starts on the waking goroutine
			{"scheduler.Waiter+handoff", waitWaiter(), true},
		} {
			h, cpu := lateness(n, interval, v.wait, v.hand)
			b.ReportMetric(us(h.Quantile(0.5)), v.name+"-p50-µs")
			b.ReportMetric(us(h.Quantile(0.99)), v.name+"-p99-µs")
			b.ReportMetric(cpu, v.name+"-cpu-%")
			b.Logf("%-24s lateness p50 %6.0f µs  p90 %6.0f µs  p99 %6.0f µs  max %6.0f µs  cpu %.2f %% of a core",
				v.name, us(h.Quantile(0.5)), us(h.Quantile(0.9)), us(h.Quantile(0.99)), us(h.Max()), cpu)
		}
		for _, v := range []struct {
			name string
			run  func(*testing.B, int, time.Duration) (lat, svc *hist.Histogram, cpu float64)
		}{
			{"engine", engineFloor},
			{"daemon", daemonFloor},
		} {
			lat, svc, cpu := v.run(b, n, interval)
			b.ReportMetric(us(lat.Quantile(0.5)), v.name+"-latency-p50-µs")
			b.ReportMetric(us(lat.Quantile(0.99)), v.name+"-latency-p99-µs")
			b.ReportMetric(us(svc.Quantile(0.5)), v.name+"-service-p50-µs")
			b.ReportMetric(cpu, v.name+"-cpu-%")
			b.Logf("%-24s latency  p50 %6.0f µs  p90 %6.0f µs  p99 %6.0f µs; service time p50 %.0f µs p99 %.0f µs; cpu %.2f %% of a core",
				v.name+" noop 10/s", us(lat.Quantile(0.5)), us(lat.Quantile(0.9)), us(lat.Quantile(0.99)), us(svc.Quantile(0.5)), us(svc.Quantile(0.99)), cpu)
		}
	}
	b.Logf("load average after: %s", loadavg())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func waitTimer(timer *time.Timer, t time.Time) {
	if d := time.Until(t); d > 0 {
		timer.Reset(d)
		<-timer.C
	}
}

// waitFine sleeps on a Go timer until 2 ms before t (its ms granularity
// then wakes it before t), then blocks the thread in nanosleep for the rest
// with 1 ns timer slack (the default 50 µs slack would add up to 50 µs).
func waitFine(timer *time.Timer, t time.Time) {
	if d := time.Until(t) - 2*time.Millisecond; d > 0 {
		timer.Reset(d)
		<-timer.C
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, 29 /* PR_SET_TIMERSLACK */, 1, 0)
	if d := time.Until(t); d > 0 {
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil)
	}
}

// waitWaiter waits with the engine's scheduler.Waiter (the timer argument
// is unused: the Waiter has its own).
func waitWaiter() func(*time.Timer, time.Time) {
	w := scheduler.NewWaiter()
	return func(_ *time.Timer, t time.Time) { w.Until(context.Background(), t) }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lateness waits for n slots interval apart and records how late each wake
// (or, with hand, its receipt by another goroutine) came.
func lateness(n int, interval time.Duration, wait func(*time.Timer, time.Time), hand bool) (*hist.Histogram, float64) {
	h := hist.New(hist.Precise)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	slots := make(chan time.Time, 1)
	done := make(chan struct{})
	if hand {
		go func() {
			for t := range slots {
				h.Record(time.Since(t))
			}
			close(done)
		}()
	}
	c0, w0 := cpuTime(), time.Now()
	start := time.Now().Add(interval)
	for k := range n {
		// A random sub-ms phase, as the engine's random start offsets give.
		t := start.Add(time.Duration(k)*interval + time.Duration(k*7919%1000)*time.Microsecond)
		wait(timer, t)
		if hand {
			slots <- t
		} else {
			h.Record(time.Since(t))
		}
	}
	if hand {
		close(slots)
		<-done
	}
	return h, 100 * float64(cpuTime()-c0) / float64(time.Since(w0))
}

// daemonFloor runs a noop target at 10 ops/s on the daemon's scheduler.
func daemonFloor(b *testing.B, n int, interval time.Duration) (lat, svc *hist.Histogram, cpu float64) {
	rate := float64(time.Second) / float64(interval)
	cfg, err := config.Parse(fmt.Appendf(nil, "global: {instance_id: floor}\ntargets:\n  - {name: floor, backend: noop, max_in_flight: 1, ops: {noop: {rate: %g}}}\n", rate))
	if err != nil {
		b.Fatal(err)
	}
	lat, svc = hist.New(hist.Precise), hist.New(hist.Precise)
	var mu sync.Mutex
	c0, w0 := cpuTime(), time.Now()
	// The first run is at a random offset within one interval.
	err = engine.RunScheduled(context.Background(), cfg, "floor-daemon-000000", time.Duration(n+1)*interval, time.Second,
		slog.New(slog.NewTextHandler(io.Discard, nil)), func(s engine.Sample) {
			mu.Lock()
			defer mu.Unlock()
			lat.Record(s.End.Sub(s.Intended))
			svc.Record(s.End.Sub(s.Sent))
		})
	if err != nil {
		b.Fatal(err)
	}
	return lat, svc, 100 * float64(cpuTime()-c0) / float64(time.Since(w0))
}

// engineFloor runs the engine's open loop with the noop probe.
func engineFloor(b *testing.B, n int, interval time.Duration) (lat, svc *hist.Histogram, cpu float64) {
	cfg, err := config.Parse([]byte("global: {instance_id: floor}\ntargets:\n  - {name: floor, backend: noop, max_in_flight: 1}\n"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := engine.NewLoad(cfg.Targets[0], "floor-bench-000000", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(time.Second)
	lat, svc = hist.New(hist.Precise), hist.New(hist.Precise)
	ch := make(chan engine.Sample, n+1)
	l.SetSink(func(s engine.Sample) { ch <- s })
	c0, w0 := cpuTime(), time.Now()
	if _, err := l.Run(context.Background(), engine.Stage{Mix: []engine.Weighted{{Op: "noop", Weight: 1}}, Workers: 1,
		Rate: float64(time.Second) / float64(interval), MaxOps: int64(n), Duration: time.Duration(n+1) * interval}); err != nil {
		b.Fatal(err)
	}
	cpu = 100 * float64(cpuTime()-c0) / float64(time.Since(w0))
	close(ch)
	for s := range ch {
		lat.Record(s.End.Sub(s.Intended))
		svc.Record(s.End.Sub(s.Sent))
	}
	return lat, svc, cpu
}
