//go:build linux

package scheduler

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWaiterScale: WAITERS goroutines (default 100) each waking at
// 10/s at random phases for 5 s, with the Go timer alone and with a Waiter:
// lateness and the process's CPU, to see what the precise phase costs when
// many targets share the process (1000 targets at 3 ops/s are 3000 waits/s).
//
//	WAITERS=300 go test -run '^$' -bench WaiterScale -benchtime 1x ./internal/scheduler/
func BenchmarkWaiterScale(b *testing.B) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("WAITERS")); err == nil && v > 0 {
		n = v
	}
	const iv, d = 100 * time.Millisecond, 5 * time.Second
	for range b.N {
		for _, precise := range []bool{false, true} {
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			var ru0 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			start := time.Now().Add(iv)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := NewWaiter()
					defer w.Stop()
					phase := time.Duration(i) * iv / time.Duration(n)
					var mine []time.Duration
					for k := 0; time.Duration(k)*iv < d; k++ {
						t := start.Add(phase + time.Duration(k)*iv)
						if precise {
							w.Until(context.Background(), t)
						} else if dd := time.Until(t); dd > 0 {
							w.timer.Reset(dd)
							<-w.timer.C
						}
						mine = append(mine, time.Since(t))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			wall := time.Since(start) + iv
			var ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e3 }
			name := "go-timer"
			if precise {
				name = "waiter"
			}
			b.Logf("%-8s %d waiters × 10/s: lateness p50 %6.0f µs p90 %6.0f µs p99 %6.0f µs; cpu %.2f %% of a core (%.0f µs per wait)",
				name, n, q(.5), q(.9), q(.99), 100*float64(cpu)/float64(wall), float64(cpu)/1e3/float64(len(lat)))
		}
	}
}
