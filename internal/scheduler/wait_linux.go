//go:build linux

package scheduler

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

const fineSupported = true

// fineSleep returns at t or just after: it blocks the thread in nanosleep
// until fineEarly before t with the thread's timer slack at 1 ns, then spins
// the rest. The slack is a property of the OS thread, so the goroutine stays
// on its thread (LockOSThread) from setting the slack until it is restored,
// and other goroutines that later run on the thread keep its usual slack.
// nanosleep is a blocking syscall (the runtime hands the P to another thread
// meanwhile) and is restarted after a signal (the runtime's preemption
// signal interrupts it), so no wake-up is early.
func fineSleep(t time.Time) {
	early := time.Duration(fineEarly.Load())
	wake := t.Add(-early)
	if time.Until(wake) > 0 {
		runtime.LockOSThread()
		slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		lowered := err == nil && slack > 1 && unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) == nil
		for {
			d := time.Until(wake)
			if d <= 0 {
				break
			}
			ts := unix.NsecToTimespec(int64(d))
			_ = unix.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
		}
		learnOvershoot(early, time.Since(wake))
		if lowered {
			_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0)
		}
		runtime.UnlockOSThread()
	}
	spinUntil(t)
}
