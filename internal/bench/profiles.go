package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/probes"
)

// Params are the command line's settings; zero values take the profile's
// defaults.
type Params = probes.BenchParams

// stageSpec is a stage as a profile lays it out, for the engine.
type stageSpec struct {
	engine.Stage
	// Name is the task name in the tables (index-append, mixed, ...).
	Name string
	// Group gathers stages into one table (an S3 object size).
	Group string
	// Setup stages (uploads before downloads) are reported, not compared.
	Setup  bool
	Warmup time.Duration
}

func specOf(s probes.BenchStage) stageSpec {
	mix := make([]engine.Weighted, 0, len(s.Mix))
	for _, w := range s.Mix {
		mix = append(mix, engine.Weighted{Op: w.Op, Weight: w.Weight})
	}
	return stageSpec{Stage: engine.Stage{Mix: mix, Workers: s.Workers, Rate: s.Rate, Duration: s.Duration, MaxOps: s.MaxOps},
		Name: s.Name, Group: s.Group, Setup: s.Setup, Warmup: s.Warmup}
}

func (s stageSpec) mode() string {
	var m string
	if s.Rate > 0 {
		m = fmt.Sprintf("open loop at %g ops/s, %d workers", s.Rate, s.Workers)
	} else {
		m = fmt.Sprintf("closed loop, %d workers", s.Workers)
	}
	switch {
	case s.Duration > 0 && s.MaxOps > 0:
		m += fmt.Sprintf(", %s or %d ops", s.Duration, s.MaxOps)
	case s.Duration > 0:
		m += ", " + s.Duration.String()
	default:
		m += fmt.Sprintf(", %d ops", s.MaxOps)
	}
	if s.Warmup > 0 {
		m += fmt.Sprintf(" after a %s warm-up", s.Warmup)
	}
	return m
}

// Profile is one reference benchmark of a backend, as its record declares
// it (probes.Backend.Bench).
type Profile struct {
	probes.BenchProfile
	// Backend is the backend whose record declares the profile.
	Backend string
}

// Profiles lists every profile of the registered backends, by backend name
// and then in the order each backend declares them.
func Profiles() []*Profile {
	var out []*Profile
	for _, name := range probes.Names() {
		be, _ := probes.Lookup(name)
		for _, bp := range be.Bench {
			out = append(out, &Profile{BenchProfile: bp, Backend: name})
		}
	}
	return out
}

// ProfileByName finds a profile.
func ProfileByName(name string) (*Profile, bool) {
	for _, p := range Profiles() {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// SetParams sets the profile's own parameters from name=value pairs
// (`dbcanary bench --param`), each a parameter the profile declares and a
// value its Check accepts.
func (p *Profile) SetParams(ps *Params, pairs []string) error {
	for _, kv := range pairs {
		name, value, ok := strings.Cut(kv, "=")
		i := slices.IndexFunc(p.Params, func(bp probes.BenchParam) bool { return bp.Name == name })
		switch {
		case !ok:
			return fmt.Errorf("%q: want name=value", kv)
		case i < 0:
			return fmt.Errorf("%s: profile %s has no such parameter (%s)", name, p.Name, p.paramNames())
		case p.Params[i].Check != nil:
			if err := p.Params[i].Check(value); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if ps.Values == nil {
			ps.Values = map[string]string{}
		}
		ps.Values[name] = value
	}
	return nil
}

func (p *Profile) paramNames() string {
	if len(p.Params) == 0 {
		return "it has none"
	}
	names := make([]string, len(p.Params))
	for i, bp := range p.Params {
		names[i] = bp.Name
	}
	return "it has " + strings.Join(names, ", ")
}

func (p *Profile) defaults(ps *Params) {
	if p.Defaults != nil {
		p.Defaults(ps)
	}
}

// configure adjusts the target (a copy; its probe section is replaced, never
// changed) and makes every op of the adjusted section available to the stages.
func (p *Profile) configure(t *config.Target, ps Params) error {
	if p.Configure != nil {
		c, err := p.Configure(t.Probe, ps)
		if err != nil {
			return fmt.Errorf("target %s: %w", t.Name, err)
		}
		t.Probe = c
	}
	resolveOps(t, ps.Timeout)
	return nil
}

func (p *Profile) stages(ps Params) []stageSpec {
	var out []stageSpec
	for _, s := range p.Stages(ps) {
		out = append(out, specOf(s))
	}
	return out
}

func (p *Profile) notes(ps Params) []string {
	if p.Notes == nil {
		return nil
	}
	return p.Notes(ps)
}

// verified is the report's sentence on what every read checks.
func (p *Profile) verified() string {
	if p.Verified == "" {
		return "No op reads anything back."
	}
	return "Every read was verified: " + p.Verified + "; a mismatch is a failed op (cause mismatch)."
}

// ParseMix reads "insert=1,read=4".
func ParseMix(s string) ([]probes.Weighted, error) {
	var mix []probes.Weighted
	for _, part := range strings.Split(s, ",") {
		op, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n < 1 || op == "" {
			return nil, fmt.Errorf("%q: want op=weight pairs with whole weights, e.g. insert=1,read=4", part)
		}
		mix = append(mix, probes.Weighted{Op: op, Weight: n})
	}
	return mix, nil
}

func mixString(mix []probes.Weighted) string {
	var s []string
	for _, w := range mix {
		s = append(s, fmt.Sprintf("%s=%d", w.Op, w.Weight))
	}
	return strings.Join(s, ",")
}

// resolveOps makes every op of the (adjusted) probe section available to
// the stages, with the op timeout.
func resolveOps(t *config.Target, timeout time.Duration) {
	if timeout <= 0 {
		timeout = t.Timeout
	}
	t.Timeout = timeout
	t.Resolved = nil
	for _, s := range t.Probe.Ops() {
		t.Resolved = append(t.Resolved, config.Op{Name: s.Name, Rate: 1, Timeout: timeout, Async: s.Async, Phases: s.Phases})
	}
}
