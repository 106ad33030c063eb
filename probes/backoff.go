package probes

import "time"

// Backoff spaces the attempts of an operation that keeps failing (connecting
// to a store, preparing its canary namespace): after a failure the next
// attempt waits Min, then twice as long after each further failure, up to
// Max; a success starts over. In between, callers fail fast with the last
// error, so a down store costs nothing but a counter. It is not safe for concurrent use: callers
// hold the lock that guards what the operation builds.
type Backoff struct {
	Min, Max time.Duration

	delay   time.Duration
	next    time.Time
	err     error
	stopped bool
}

// Wait returns the last failure's error while the wait after it runs (the
// caller returns it instead of trying), and nil when an attempt may be made.
func (b *Backoff) Wait(now time.Time) error {
	if b.stopped || now.Before(b.next) {
		return b.err
	}
	return nil
}

// Fail records a failed attempt at now and returns how long the next one
// waits.
func (b *Backoff) Fail(now time.Time, err error) time.Duration {
	b.delay = min(max(2*b.delay, b.Min), b.Max)
	b.next, b.err = now.Add(b.delay), err
	return b.delay
}

// Succeed records a successful attempt: the next failure waits Min again.
func (b *Backoff) Succeed() { b.delay, b.next, b.err = 0, time.Time{}, nil }

// Err is the last failure's error, nil after a success.
func (b *Backoff) Err() error { return b.err }

// Stop makes every later Wait return err: the operation is never tried
// again (its owner is closed).
func (b *Backoff) Stop(err error) { b.stopped, b.err = true, err }
