package probes

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

type testConfig struct{}

func (testConfig) Validate() []error { return nil }
func (testConfig) Ops() []OpSpec     { return []OpSpec{{Name: "op", DefaultRate: 1}} }

type testProbe struct{}

func (testProbe) Prepare(context.Context) error               { return nil }
func (testProbe) Run(context.Context, string, *Outcome) error { return nil }
func (testProbe) Close() error                                { return nil }

func testBackend(name string) Backend {
	return Backend{Name: name, NewConfig: func() Config { return testConfig{} },
		New: func(Target) (Probe, error) { return testProbe{}, nil }}
}

func panicOf(f func()) (msg string) {
	defer func() { msg = fmt.Sprint(recover()) }()
	f()
	return ""
}

// TestRegister: one record per backend; a mistake in it panics at init, so
// it fails every test and the daemon's start.
func TestRegister(t *testing.T) {
	a := testBackend("reg-a")
	a.Facts = Facts{Title: "Alpha", Ops: []OpFacts{{Name: "op"}}}
	a.Bench = []BenchProfile{{Name: "alpha-bench", Stages: func(BenchParams) []BenchStage { return nil },
		Tables: func(BenchParams) []BenchTable { return nil }}}
	Register(a)
	b := testBackend("reg-b") // a test's backend may go without facts
	Register(b)
	if got, ok := Lookup("reg-a"); !ok || got.Facts.Title != "Alpha" || len(got.Bench) != 1 {
		t.Fatalf("Lookup: %+v %v", got, ok)
	}
	if got, _ := Lookup("reg-b"); got.Facts.Declared() {
		t.Error("zero facts are declared")
	}
	for want, be := range map[string]Backend{
		"incomplete":       {Name: "reg-c"},
		"registered twice": a,
		"facts of backend": func() Backend { c := testBackend("reg-d"); c.Facts = Facts{Title: "D"}; return c }(),
		"bench profile":    func() Backend { c := testBackend("reg-e"); c.Bench = []BenchProfile{{Name: "e"}}; return c }(),
	} {
		if msg := panicOf(func() { Register(be) }); !strings.Contains(msg, want) {
			t.Errorf("%s: panic %q", want, msg)
		}
	}
	if got := Stores(); got != "Alpha" {
		t.Errorf("Stores() = %q, want Alpha (reg-b has no title)", got)
	}
	c := testBackend("reg-f")
	c.Facts = Facts{Title: "Foxtrot", Ops: []OpFacts{{Name: "op"}}}
	Register(c)
	d := testBackend("reg-g")
	d.Facts = Facts{Title: "Golf", Ops: []OpFacts{{Name: "op"}}}
	Register(d)
	if got, want := Stores(), "Alpha, Foxtrot and Golf"; got != want {
		t.Errorf("Stores() = %q, want %q", got, want)
	}
}
