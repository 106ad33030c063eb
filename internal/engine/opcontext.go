package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// opContext is an op's deadline context. context.WithDeadline costs four
// allocations per op (context, cancel closure, timer); this costs one: the
// worker owns a single reusable timer and the Done channel is made only if a
// probe asks for it. Cancellation by the parent (shutdown) is delivered by
// the runner, which cancels every worker's current op.
type opContext struct {
	context.Context // the runner's op context: values and shutdown state
	deadline        time.Time

	mu   sync.Mutex
	done chan struct{}
	err  error
}

func (c *opContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *opContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *opContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *opContext) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// worker runs ops one at a time with its own timer for op deadlines.
type worker struct {
	cur   atomic.Pointer[opContext]
	timer *time.Timer
}

func newWorker() *worker {
	w := &worker{}
	w.timer = time.AfterFunc(time.Hour, w.expire)
	w.timer.Stop()
	return w
}

// expire fires at an op's deadline; the check guards against a late fire
// from a previous op landing on the current one.
func (w *worker) expire() {
	if c := w.cur.Load(); c != nil && !time.Now().Before(c.deadline) {
		c.cancel(context.DeadlineExceeded)
	}
}

// begin starts an op context with the given deadline.
func (w *worker) begin(parent context.Context, deadline time.Time) *opContext {
	c := &opContext{Context: parent, deadline: deadline}
	w.cur.Store(c)
	w.timer.Reset(time.Until(deadline))
	return c
}

// end releases the op context; anything still holding it sees it cancelled.
func (w *worker) end(c *opContext) {
	w.timer.Stop()
	w.cur.Store(nil)
	c.cancel(context.Canceled)
}

// abort cancels the current op (shutdown after the grace period).
func (w *worker) abort() {
	if c := w.cur.Load(); c != nil {
		c.cancel(context.Canceled)
	}
}
