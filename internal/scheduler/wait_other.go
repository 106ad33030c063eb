//go:build !linux

package scheduler

import "time"

// Elsewhere the plain Go timer is used to the slot: per-thread timer slack
// and a blocking nanosleep are Linux's.
const fineSupported = false

func fineSleep(t time.Time) { spinUntil(t) }
