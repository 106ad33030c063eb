//go:build integration

package faults

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// toxiAddr is Toxiproxy's API address (test/stack/toxiproxy.sh).
var toxiAddr string

// TestMain starts Toxiproxy only: each backend's test starts its server at
// the beginning of its group and stops it at the end (if this process
// started it), so at most one large server runs at a time.
func TestMain(m *testing.M) {
	toxiAddr = stack.Must("toxiproxy")["DBCANARY_TEST_TOXIPROXY_ADDR"]
	stack.Exit(m.Run(), printFigures)
}

// startGroup starts a backend for one test group and stops it when the group
// ends, unless it was already running (someone else's) or DBCANARY_STACK_KEEP=1.
func startGroup(t *testing.T, backend string) stack.Env {
	t.Helper()
	_, statusErr := stack.Script(backend, "status")
	wasRunning := statusErr == nil
	t0 := time.Now()
	env, err := stack.Start(backend)
	if err != nil {
		t.Fatalf("starting %s: %v", backend, err)
	}
	if !wasRunning {
		record(backend, "-", "server start (stack script)", time.Since(t0))
		t.Cleanup(func() {
			if os.Getenv("DBCANARY_STACK_KEEP") == "1" {
				return
			}
			if err := stack.Stop(backend); err != nil {
				t.Errorf("stopping %s: %v", backend, err)
			}
		})
	}
	return env
}

// A figure is one measured value, printed at the end as a table for docs/failure-semantics.md.
type figure struct {
	backend, fault, what, value string
}

var (
	figMu   sync.Mutex
	figures []figure
)

// record keeps a figure; durations are rounded to a readable precision.
func record(backend, fault, what string, v any) {
	var s string
	switch x := v.(type) {
	case time.Duration:
		s = roundDur(x).String()
	case float64:
		s = fmt.Sprintf("%.4g", x)
	default:
		s = fmt.Sprint(x)
	}
	figMu.Lock()
	figures = append(figures, figure{backend, fault, what, s})
	figMu.Unlock()
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d
}

// ms formats seconds as milliseconds with 0.01 ms resolution.
func ms(seconds float64) string { return fmt.Sprintf("%.2f ms", seconds*1000) }

func printFigures() {
	figMu.Lock()
	defer figMu.Unlock()
	if len(figures) == 0 {
		return
	}
	sort.SliceStable(figures, func(i, j int) bool { return figures[i].backend < figures[j].backend })
	var b strings.Builder
	b.WriteString("\nFigures (markdown, for docs/failure-semantics.md):\n\n| backend | fault | what | measured |\n|---|---|---|---|\n")
	for _, f := range figures {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.backend, f.fault, f.what, f.value)
	}
	fmt.Print(b.String())
}
