// Package config loads, defaults and validates dbcanary's YAML configuration.
// Decoding is strict: an unknown key, a key set twice or a value of the wrong
// type is an error naming its path and line, and every error is reported at
// once.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/probes"
)

// Config is the whole configuration file.
type Config struct {
	Global  Global   `yaml:"global"`
	Targets []Target `yaml:"targets"`
}

// Global holds defaults for every target and instance-wide settings.
type Global struct {
	// InstanceID is put into every name the canary creates (queues, keys,
	// document ids, object prefixes) so instances sharing a store never read
	// each other's data. Default: $DBCANARY_INSTANCE_ID, else the host name.
	InstanceID string `yaml:"instance_id"`
	// Timeout is the default per-op timeout.
	Timeout time.Duration `yaml:"timeout"`
	// MaxInFlight is the default bound on concurrent ops per target.
	MaxInFlight int `yaml:"max_in_flight"`
	// StateDir keeps the durability ledger (probes.LedgerStore) across restarts;
	// empty keeps it in memory.
	StateDir string `yaml:"state_dir"`
	// Metrics is how the op metrics are exported.
	Metrics GlobalMetrics `yaml:"metrics"`
}

// GlobalMetrics is the global.metrics section.
type GlobalMetrics struct {
	// Histograms is the classic-bucket layout of the op histograms
	// (docs/sizing.md); empty when the file does not set it (Effective).
	// The --metrics.histograms flag, when given, wins; a reload cannot change
	// it (the op histograms would all be re-created).
	Histograms Histograms `yaml:"histograms"`
}

// Histograms is a histogram layout: compact or full (internal/metrics), or
// empty: not set.
type Histograms string

// The histogram layouts.
const (
	HistogramsCompact Histograms = "compact"
	HistogramsFull    Histograms = "full"
	// DefaultHistograms is the layout when neither the file nor the flag sets one.
	DefaultHistograms = HistogramsCompact
)

// Effective is the layout h selects: DefaultHistograms when not set.
func (h Histograms) Effective() Histograms {
	if h == "" {
		return DefaultHistograms
	}
	return h
}

// MarshalYAML writes the effective layout, for dump-config.
func (h Histograms) MarshalYAML() (any, error) { return string(h.Effective()), nil }

// UnmarshalYAML accepts the known layouts only.
func (h *Histograms) UnmarshalYAML(n *yaml.Node) error {
	// A yaml.TypeError with the column: decoding goes on, and the problem is
	// reported with its path and line (strict.go).
	fail := func(format string, a ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d column %d: ", n.Line, n.Column) + fmt.Sprintf(format, a...)}}
	}
	switch {
	case n.Kind != yaml.ScalarNode:
		return fail("expected compact or full, got %s", kindName(n))
	case n.Value != string(HistogramsCompact) && n.Value != string(HistogramsFull):
		return fail("unknown histogram layout %q (one of compact, full)", n.Value)
	}
	*h = Histograms(n.Value)
	return nil
}

// DefaultGlobal is the global section's defaults.
var DefaultGlobal = Global{Timeout: 5 * time.Second, MaxInFlight: 16}

// Target is one store to probe. The loader decodes a target's own keys
// straight into it; its backend section goes into Probe.
type Target struct {
	Name    string `yaml:"name"`
	Backend string `yaml:"backend"`
	// Timeout and MaxInFlight default to the global values.
	Timeout     time.Duration     `yaml:"timeout"`
	MaxInFlight int               `yaml:"max_in_flight"`
	Labels      map[string]string `yaml:"labels"`
	// Ops maps an op name (or a glob such as "get_*") to its settings. When
	// absent, every op runs at its default rate.
	Ops map[string]OpConfig `yaml:"ops"`

	// Probe is the decoded backend section (the `rabbitmq:` block, ...).
	Probe probes.Config `yaml:"-"`
	// Resolved is the effective op list, sorted by name.
	Resolved []Op `yaml:"-"`
}

// OpConfig overrides one op's settings.
type OpConfig struct {
	// Rate in ops/s; fractions are fine (0.2 = one op every 5 s); 0 disables the op.
	Rate *float64 `yaml:"rate"`
	// Timeout overrides the target's timeout for this op.
	Timeout time.Duration `yaml:"timeout"`
}

// Op is an op as it will run.
type Op struct {
	Name    string
	Rate    float64
	Timeout time.Duration
	Async   bool
	Phases  []string
}

// maxConfigBytes bounds the config file size.
const maxConfigBytes = 16 << 20

// MaxRate bounds an op's rate: dbcanary is a canary, not a load generator.
const MaxRate = 10000

var (
	targetNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	instanceRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	reserved     = []string{"target", "backend", "op", "result", "cause", "phase", "direction", "instance", "job", "vantage"}
)

// LoadFile reads and validates a config file.
func LoadFile(file string) (*Config, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read config: %w", err)
	}
	defer f.Close()
	// Bounded: a config is kilobytes; a wrong path (a device, a FIFO) must not hang or exhaust memory.
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("cannot read config: %s is larger than %d MiB", file, maxConfigBytes>>20)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseDocument reads data as exactly one YAML document whose top is a
// mapping, and returns the document's root node and that mapping.
func parseDocument(data []byte) (*yaml.Node, *yaml.Node, error) {
	root := &yaml.Node{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(root); err != nil && err != io.EOF {
		return nil, nil, fmt.Errorf("config is not valid YAML: %s", cleanYAMLError(err))
	}
	// A second document after "---" would otherwise be silently ignored.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, fmt.Errorf("line %d: the config holds more than one YAML document (a second one starts here): merge them into one", extra.Line)
	} else if err != io.EOF {
		return nil, nil, fmt.Errorf("config is not valid YAML: %s", cleanYAMLError(err))
	}
	if len(root.Content) == 0 {
		return nil, nil, errors.New("config is empty: it needs a targets list")
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("line %d: the config must be a mapping with global and targets", doc.Line)
	}
	return root, doc, nil
}

// Parse decodes, defaults and validates a config. On error it returns every
// problem at once, joined (errors.Join): each names its path, and its line
// for a YAML-level problem.
func Parse(data []byte) (*Config, error) {
	root, doc, err := parseDocument(data)
	if err != nil {
		return nil, errors.Join(err)
	}
	// yaml.v3 finds the unknown keys, keys set twice and values of the wrong
	// type; each target's share is reported with that target's other problems.
	var errs []error
	perTarget := map[int][]problem{}
	var targetsProblems []problem
	globalBad := false
	for _, p := range strictProblems(data, root) {
		var i int
		switch {
		case p.path == "targets":
			targetsProblems = append(targetsProblems, p)
		case targetIndex(p.path, &i):
			perTarget[i] = append(perTarget[i], p)
		default:
			globalBad = globalBad || p.path == "global" || strings.HasPrefix(p.path, "global.")
			errs = append(errs, p.err())
		}
	}
	cfg := &Config{Global: DefaultGlobal}
	var targetsNode *yaml.Node
	for i := 0; i+1 < len(doc.Content); i += 2 {
		switch k, v := doc.Content[i], doc.Content[i+1]; k.Value {
		case "global":
			if !globalBad {
				_ = v.Decode(&cfg.Global) // yaml.v3 found no problem in it
			}
		case "targets":
			targetsNode = v
		}
	}
	errs = append(errs, cfg.Global.validate()...)
	switch {
	case targetsNode == nil:
		errs = append(errs, errors.New("targets: missing: list at least one target"))
	case len(targetsProblems) > 0:
		for _, p := range targetsProblems {
			errs = append(errs, p.err())
		}
	case targetsNode.Kind != yaml.SequenceNode:
		// An alias to a list: yaml.v3 decodes it, but a target's path would not be its own.
		errs = append(errs, fmt.Errorf("targets: line %d: expected a list, got %s", targetsNode.Line, kindName(targetsNode)))
	default:
		names := map[string]int{}
		for i, tn := range targetsNode.Content {
			t, terrs := decodeTarget(tn, i, cfg.Global, perTarget[i])
			errs = append(errs, terrs...)
			if t.Name != "" {
				if j, dup := names[t.Name]; dup {
					errs = append(errs, fmt.Errorf("targets[%d].name: %q is already used by targets[%d]", i, t.Name, j))
				}
				names[t.Name] = i
			}
			cfg.Targets = append(cfg.Targets, t)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// targetIndex reports whether path is inside targets[i], and sets i.
func targetIndex(path string, i *int) bool {
	rest, ok := strings.CutPrefix(path, "targets[")
	if !ok {
		return false
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return false
	}
	v, err := strconv.Atoi(n)
	*i = v
	return err == nil
}

func (g *Global) validate() []error {
	var errs []error
	if g.InstanceID == "" {
		g.InstanceID = DefaultInstanceID()
	} else if !instanceRE.MatchString(g.InstanceID) {
		errs = append(errs, fmt.Errorf("global.instance_id: %q must be 1-40 lowercase letters, digits or '-', starting with a letter or digit", g.InstanceID))
	}
	if g.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("global.timeout: must be positive, got %s", g.Timeout))
	}
	if g.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("global.max_in_flight: must be at least 1, got %d", g.MaxInFlight))
	}
	return errs
}

// DefaultInstanceID derives an instance id from $DBCANARY_INSTANCE_ID or the
// host name (a pod name in Kubernetes), reduced to the allowed characters.
func DefaultInstanceID() string {
	id := os.Getenv("DBCANARY_INSTANCE_ID")
	if id == "" {
		id, _ = os.Hostname()
	}
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[len(s)-40:], "-")
		s = strings.TrimLeft(s, "-")
	}
	if s == "" {
		s = "dbcanary"
	}
	return s
}

// decodeTarget decodes and validates targets[i]; problems are the ones
// yaml.v3 found in it.
func decodeTarget(n *yaml.Node, i int, g Global, problems []problem) (Target, []error) {
	p := fmt.Sprintf("targets[%d]", i)
	var errs []error
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		for _, pr := range problems {
			errs = append(errs, pr.err())
		}
		if len(errs) == 0 { // a null target: yaml.v3 decodes it as an empty one
			errs = append(errs, fmt.Errorf("%s: line %d: expected a mapping, got %s", p, n.Line, kindName(n)))
		}
		return Target{}, errs
	}
	ts := splitTarget(n, p)
	stop := false
	for _, pr := range problems {
		if ts.sectionOf(pr) == "" {
			errs = append(errs, pr.err())
			stop = stop || !pr.unknownKey
		}
	}
	if stop {
		return Target{}, errs // later checks would only repeat these problems
	}
	var t Target
	if err := ts.generic.Decode(&t); err != nil {
		return Target{}, append(errs, fmt.Errorf("%s: %s", p, cleanYAMLError(err)))
	}
	if t.Timeout == 0 {
		t.Timeout = g.Timeout
	}
	if t.MaxInFlight == 0 {
		t.MaxInFlight = g.MaxInFlight
	}
	errs = append(errs, validateTarget(p, t)...)
	return ts.decodeBackend(t, problems, errs)
}

// targetSections is a target's mapping split in two: the target's own keys,
// and each backend's section (the key named after it).
type targetSections struct {
	p            string // the target's path, targets[i]
	generic      *yaml.Node
	sections     map[string]*yaml.Node
	sectionLines map[string]int
}

func splitTarget(n *yaml.Node, p string) targetSections {
	ts := targetSections{p: p, generic: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line},
		sections: map[string]*yaml.Node{}, sectionLines: map[string]int{}}
	fields := yamlFields(reflectType[Target]())
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		if _, ok := fields[k.Value]; ok {
			ts.generic.Content = append(ts.generic.Content, k, v)
		} else if _, ok := probes.Lookup(k.Value); ok {
			ts.sections[k.Value], ts.sectionLines[k.Value] = v, k.Line
		}
	}
	return ts
}

// sectionOf is the backend section pr is in, or "". A section's problems wait
// until the backend is known: those of a section for another backend would
// only repeat that it does not match.
func (ts targetSections) sectionOf(pr problem) string {
	for name := range ts.sections {
		if sp := ts.p + "." + name; pr.path == sp || strings.HasPrefix(pr.path, sp+".") || strings.HasPrefix(pr.path, sp+"[") {
			return name
		}
	}
	return ""
}

// validateTarget checks the target's own keys: name, timeout, max_in_flight, labels.
func validateTarget(p string, t Target) []error {
	var errs []error
	switch {
	case t.Name == "":
		errs = append(errs, fmt.Errorf("%s.name: missing: every target needs a unique name", p))
	case !targetNameRE.MatchString(t.Name):
		errs = append(errs, fmt.Errorf("%s.name: %q must be 1-63 lowercase letters, digits, '-', '_' or '.', starting with a letter or digit (it becomes part of queue, index and key names)", p, t.Name))
	}
	if t.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s.timeout: must be positive, got %s", p, t.Timeout))
	}
	if t.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("%s.max_in_flight: must be at least 1, got %d", p, t.MaxInFlight))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		switch {
		case !labelNameRE.MatchString(k) || strings.HasPrefix(k, "__"):
			errs = append(errs, fmt.Errorf("%s.labels.%s: not a valid Prometheus label name", p, k))
		case slices.Contains(reserved, k):
			errs = append(errs, fmt.Errorf("%s.labels.%s: reserved label name (dbcanary sets it)", p, k))
		}
	}
	return errs
}

// decodeBackend decodes and validates the section of t's backend into
// t.Probe and resolves its ops; errs are the target's errors so far.
func (ts targetSections) decodeBackend(t Target, problems []problem, errs []error) (Target, []error) {
	p := ts.p
	b, ok := probes.Lookup(t.Backend)
	switch {
	case t.Backend == "":
		errs = append(errs, fmt.Errorf("%s.backend: missing: one of %s", p, strings.Join(probes.Names(), ", ")))
		return t, errs
	case !ok:
		errs = append(errs, fmt.Errorf("%s.backend: unknown backend %q (known: %s)", p, t.Backend, strings.Join(probes.Names(), ", ")))
		return t, errs
	}
	for _, name := range slices.Sorted(maps.Keys(ts.sectionLines)) {
		if name != t.Backend {
			errs = append(errs, fmt.Errorf("%s.%s: line %d: section does not match backend %q", p, name, ts.sectionLines[name], t.Backend))
		}
	}
	t.Probe = b.NewConfig()
	sp := p + "." + t.Backend
	if sn := ts.sections[t.Backend]; sn != nil {
		before := len(errs)
		for _, pr := range problems {
			if ts.sectionOf(pr) == t.Backend {
				errs = append(errs, pr.err())
			}
		}
		if len(errs) > before {
			return t, errs
		}
		if err := sn.Decode(t.Probe); err != nil {
			return t, append(errs, fmt.Errorf("%s: %s", sp, cleanYAMLError(err)))
		}
	}
	for _, err := range t.Probe.Validate() {
		var fe *probes.FieldError
		if errors.As(err, &fe) && fe.Field != "" {
			errs = append(errs, fmt.Errorf("%s.%s: %s", sp, fe.Field, fe.Msg))
		} else {
			errs = append(errs, fmt.Errorf("%s: %v", sp, err))
		}
	}
	ops, operrs := resolveOps(p, t, t.Probe.Ops())
	t.Resolved = ops
	errs = append(errs, operrs...)
	return t, errs
}

// resolveOps applies the target's ops map (exact names win over globs) to the
// backend's op list.
func resolveOps(p string, t Target, specs []probes.OpSpec) ([]Op, []error) {
	var errs []error
	known := make([]string, len(specs))
	for i, s := range specs {
		known[i] = s.Name
	}
	for _, key := range slices.Sorted(maps.Keys(t.Ops)) {
		oc := t.Ops[key]
		kp := fmt.Sprintf("%s.ops.%s", p, key)
		matched := false
		for _, s := range specs {
			if ok, err := path.Match(key, s.Name); err != nil {
				errs = append(errs, fmt.Errorf("%s: bad pattern: %v", kp, err))
				break
			} else if ok {
				matched = true
				if s.Async && oc.Rate != nil {
					errs = append(errs, fmt.Errorf("%s.rate: %s is event-driven (one sample per event) and takes no rate", kp, s.Name))
				}
			}
		}
		if !matched {
			if s := closest(key, known); s != "" {
				errs = append(errs, fmt.Errorf("%s: unknown op %q for backend %s (did you mean %q?)", kp, key, t.Backend, s))
			} else {
				errs = append(errs, fmt.Errorf("%s: unknown op %q for backend %s (known: %s)", kp, key, t.Backend, strings.Join(known, ", ")))
			}
		}
		if oc.Rate != nil && (math.IsNaN(*oc.Rate) || *oc.Rate < 0 || *oc.Rate > MaxRate) {
			errs = append(errs, fmt.Errorf("%s.rate: must be between 0 and %d ops/s, got %g", kp, MaxRate, *oc.Rate))
		}
		if oc.Timeout < 0 {
			errs = append(errs, fmt.Errorf("%s.timeout: must be positive, got %s", kp, oc.Timeout))
		}
	}
	var ops []Op
	for _, s := range specs {
		op := Op{Name: s.Name, Rate: s.DefaultRate, Timeout: t.Timeout, Async: s.Async, Phases: s.Phases}
		if len(t.Ops) > 0 {
			// An explicit ops map lists what runs: ops it does not name are off.
			op.Rate = 0
			oc, ok := lookupOp(t.Ops, s.Name)
			if !ok {
				continue
			}
			if oc.Rate != nil {
				op.Rate = *oc.Rate
			} else {
				op.Rate = s.DefaultRate
			}
			if oc.Timeout > 0 {
				op.Timeout = oc.Timeout
			}
		}
		if op.Rate > 0 || op.Async {
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Name < ops[j].Name })
	if len(ops) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s.ops: no op is enabled (known: %s)", p, strings.Join(known, ", ")))
	}
	return ops, errs
}

// lookupOp finds the settings for an op: an exact key first, then the
// longest matching glob.
func lookupOp(m map[string]OpConfig, name string) (OpConfig, bool) {
	if oc, ok := m[name]; ok {
		return oc, true
	}
	best, found := "", false
	for k := range m {
		if ok, _ := path.Match(k, name); ok && len(k) > len(best) {
			best, found = k, true
		}
	}
	return m[best], found
}
