package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress is a live status line: redrawn in place on a terminal, printed
// as a plain line at most every `every` elsewhere (a log file, a test).
type progress struct {
	w     io.Writer
	tty   bool
	every time.Duration
	last  time.Time
	shown bool
}

// newProgress writes to w; total is the expected run time, which spaces the
// plain lines so that a long run prints about twenty.
func newProgress(w io.Writer, total time.Duration) *progress {
	p := &progress{w: w, every: max(time.Second, total/20)}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// update shows line (force: even if a plain line was printed recently).
func (p *progress) update(line string, force bool) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.shown = true
		return
	}
	if now := time.Now(); force || now.Sub(p.last) >= p.every {
		fmt.Fprintln(p.w, line)
		p.last = now
	}
}

// done ends the line so that what follows starts on a fresh one.
func (p *progress) done() {
	if p.tty && p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

// clock formats an elapsed time as 1m02s / 12.3s.
func clock(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
