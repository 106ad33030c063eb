package scheduler

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Waking up on time.
//
// A Go timer fires 0..1 ms late at best: the runtime's netpoller waits in
// whole milliseconds (runtime/netpoll_epoll.go turns a wait under 1 ms into
// 1 ms and truncates longer ones to ms, then tops them up with another 1 ms
// wait), so a slot at a random sub-millisecond offset is missed by a uniform
// 0..1 ms, p50 ~0.5 ms: at canary rates that lateness, not the store, was
// most of a fast op's latency. A Waiter therefore sleeps on the Go timer only
// until Lead before the slot and then, on Linux, blocks its thread in
// nanosleep for the rest with the thread's timer slack lowered to 1 ns (the
// default 50 µs slack would add up to 50 µs). The kernel's own wake-up
// latency (20-50 µs on a VM) is then taken out by waking a little early and
// spinning the last microseconds: how early is learnt from the wake-ups
// themselves (see fineEarly), at most maxEarly.
//
// Each goroutine in the precise phase holds an OS thread in a blocking
// syscall for at most Lead, so at most MaxPrecise of them are in it at once
// across the process; a wait that finds them all taken falls back to the
// plain timer (0..1 ms late, as before). With 1000 targets at 3 ops/s, ~4.5
// waits are in the precise phase on average.
//
// A precise wait costs about 60 µs of CPU more than a plain one (a second
// wake-up, and the runtime's sysmon polling while a thread is in a blocking
// syscall): 3000 waits/s cost ~20 % of a core instead of ~5 %. The precise
// phase therefore also has a rate budget, MaxPreciseRate per second across
// the process (a token bucket, golang.org/x/time/rate): a canary's handful of targets at 1-10 ops/s
// all wake on time, while a daemon with hundreds of targets spends at most
// ~0.6 % of a core on precision and wakes the rest on the plain timer.

const (
	// Lead is how long before a slot the Go timer hands over to the precise
	// phase. It must exceed the Go timer's own lateness (up to 1 ms) or the
	// timer would overshoot the slot.
	Lead = 1500 * time.Microsecond
	// MaxPrecise bounds the goroutines in the precise phase at once, and so
	// the OS threads pinned in nanosleep.
	MaxPrecise = 8
	// maxEarly bounds how early the precise phase wakes before the slot, and
	// so the CPU spun per wait.
	maxEarly = 50 * time.Microsecond
	// MaxPreciseRate is the precise phase's budget of waits per second across
	// the process, with a burst of preciseBurst.
	MaxPreciseRate = 100
	preciseBurst   = 20
)

// preciseBudget is the precise phase's rate budget across the process.
var preciseBudget = newPreciseBudget()

func newPreciseBudget() *rate.Limiter { return rate.NewLimiter(MaxPreciseRate, preciseBurst) }

// preciseGate is the process-wide semaphore of the precise phase.
var preciseGate = make(chan struct{}, MaxPrecise)

// fineEarly is how long before the slot nanosleep aims, in ns: a running
// estimate of the 20th percentile of nanosleep's overshoot (stochastic
// quantile estimation: up 1 µs when the wake-up overshot the estimate, down
// 4 µs when it did not), so about one wake-up in five lands before the slot
// and spins the difference, and the others are late by their overshoot minus
// the estimate instead of by all of it. Shared by every waiter: lost updates
// between goroutines only slow the estimate down.
var fineEarly atomic.Int64

// The overshoot's 20th percentile was 20-35 µs on a 2-core VM; on bare
// metal it is a few µs, which the estimate reaches in a few wake-ups.
func init() { fineEarly.Store(int64(25 * time.Microsecond)) }

// learnOvershoot folds one nanosleep overshoot into fineEarly.
func learnOvershoot(early, overshoot time.Duration) {
	if overshoot > early {
		early += time.Microsecond
	} else {
		early -= 4 * time.Microsecond
	}
	fineEarly.Store(int64(min(max(early, 0), maxEarly)))
}

// Waiter waits for slots. Use one per goroutine (it reuses its timer), from
// NewWaiter; Stop it when done.
type Waiter struct {
	timer *time.Timer
	gate  chan struct{}
	// Waits that used the precise phase, and waits that found it full and
	// fell back to the plain timer (for tests).
	precise, fellBack int
}

// NewWaiter returns a Waiter that shares the process's precise-phase bound.
func NewWaiter() *Waiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Waiter{timer: t, gate: preciseGate}
}

// Stop releases the Waiter's timer.
func (w *Waiter) Stop() { w.timer.Stop() }

// Until blocks until t or until ctx is done, and reports whether t was
// reached. It never returns true before t (time.Now() is not before t
// afterwards). Cancelling ctx stops the wait at once, except during the
// precise phase, which lasts at most Lead.
func (w *Waiter) Until(ctx context.Context, t time.Time) bool {
	for {
		d := time.Until(t)
		if d <= 0 {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := d
		if fineSupported {
			if d > Lead {
				wait = d - Lead
			} else {
				if preciseBudget.Allow() {
					select {
					case w.gate <- struct{}{}:
						w.precise++
						fineSleep(t)
						<-w.gate
						continue
					default:
					}
				}
				w.fellBack++ // all taken or over budget: the plain timer to the slot
			}
		}
		w.timer.Reset(wait)
		select {
		case <-ctx.Done():
			w.timer.Stop()
			return false
		case <-w.timer.C:
		}
	}
}

// spinUntil returns once t has come.
func spinUntil(t time.Time) {
	for time.Now().Before(t) {
	}
}
