// Package probes holds the contract every dbcanary backend implements: a Probe
// runs one canary op at a time against one target, inside the canary's own
// namespace, and returns a typed Outcome. The engine (internal/engine) owns
// scheduling, timeouts, in-flight bounds and metrics; a probe only says
// "run this op once". What every probe calls lives here too: the durability
// ledger the engine hands it (Target.Ledger, ledger.go), error causes, TLS
// and secrets, and Backoff for its reconnects.
package probes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
)

// Probe runs canary ops against one target. The engine calls Prepare before the
// first op (and again after Prepare failed), Run concurrently up to the target's
// max_in_flight, and Close once when the target is removed or the daemon stops.
type Probe interface {
	// Prepare creates or checks the canary's own namespace (queue, keyspace,
	// index, bucket prefix). It must be idempotent.
	Prepare(ctx context.Context) error
	// Run performs one op and verifies what it read back. It fills out and
	// returns an error classified with Fail (or one CauseOf can classify).
	Run(ctx context.Context, op string, out *Outcome) error
	// Close releases connections and stops background goroutines.
	Close() error
}

// Outcome is what one op reports besides its error. The engine hands Run a
// zeroed Outcome it owns, so filling it costs no allocation.
type Outcome struct {
	// Intended is set by the engine before Run: when this run was due in the
	// open-loop schedule. A probe whose op starts a later async op (a published
	// message that is consumed later) carries it along so that op's latency is
	// measured from the same origin.
	Intended time.Time
	// Sent is when the request actually left for the server (after any
	// reconnect or queueing inside the probe); zero means "when Run was called".
	// Service time is measured from it.
	Sent time.Time
	// BytesSent and BytesReceived are payload bytes moved, for throughput panels.
	BytesSent, BytesReceived int64
	phases                   [maxPhases]Phase
	nphases                  int
}

const maxPhases = 4

// Phase is a named part of an op's duration (time to first byte, end-to-end
// delivery), exported as dbcanary_op_phase_seconds{phase=Name}. Names must be
// a small fixed set per probe.
type Phase struct {
	Name     string
	Duration time.Duration
}

// AddPhase records a named sub-duration of the op; extra phases beyond the
// fixed capacity are dropped rather than allocated.
func (o *Outcome) AddPhase(name string, d time.Duration) {
	if o.nphases < maxPhases {
		o.phases[o.nphases] = Phase{Name: name, Duration: d}
		o.nphases++
	}
}

// Phases returns the recorded phases.
func (o *Outcome) Phases() []Phase { return o.phases[:o.nphases] }

// Reset zeroes the outcome for reuse and sets its intended start.
func (o *Outcome) Reset(intended time.Time) { *o = Outcome{Intended: intended} }

// OpSpec describes one op a configured probe can run.
type OpSpec struct {
	Name string
	// DefaultRate is the rate in ops/s used when the target's config lists no
	// ops; 0 means the op is off unless configured.
	DefaultRate float64
	// Async ops are not scheduled: the probe reports one sample per event
	// (e.g. each message received) through Target.Report. They take no rate.
	Async bool
	// Phases lists the phase names this op may record.
	Phases []string
	// Help is one line for the config reference and `dbcanary once`.
	Help string
	// Sent and Received are the payload bytes one run of the op typically
	// moves to and from the store (the canary's data and what the store
	// returns of it, without protocol overhead). check-config multiplies them
	// by the op's rate to print the load a target puts on its store.
	Sent, Received float64
}

// Config is a backend's section of a target's configuration (for example the
// `rabbitmq:` block). NewConfig returns it with defaults set; YAML decoding
// fills it; Validate reports every problem at once.
type Config interface {
	// Validate returns every problem found, as FieldErrors relative to the
	// section (the config loader prefixes the path, e.g. targets[2].rabbitmq.).
	Validate() []error
	// Ops lists the ops this configuration can run.
	Ops() []OpSpec
}

// Endpointer is implemented by every backend's Config: each endpoint as
// configured (a URL, host:port or host); none for a probe that connects
// nowhere. `dbcanary bench` refuses a target with any endpoint off loopback
// unless told --yes, and a section that is not an Endpointer always.
type Endpointer interface {
	Endpoints() []string
}

// Target is what a probe is built from.
type Target struct {
	// Name is the target's unique name (a metric label value).
	Name string
	// InstanceID identifies this dbcanary instance; probes put it into every
	// queue name, key, document id and object prefix they create so that
	// instances probing the same store never see each other's data.
	InstanceID string
	// Ephemeral is set for one-shot runs (`dbcanary once`, `dbcanary bench`):
	// InstanceID is then unique to this run, and Close removes everything the
	// probe created (queue, objects) instead of leaving it for a next run.
	Ephemeral bool
	// Config is the backend's validated section, of the type NewConfig returned.
	Config Config
	// Logger already carries the target and backend attributes: log lines do not repeat them.
	Logger *slog.Logger
	// Report delivers samples of async ops. It is safe for concurrent use and
	// never nil.
	Report Reporter
	// Certs is told the certificate chains the store presents over TLS; pass
	// it to TLSConfig.Build. May be nil.
	Certs CertObserver
	// Ledger is the target's durability ledger, opened by the engine when
	// Config keeps one (LedgerConfigured), else nil. The probe writes to it
	// and reads back; the engine closes it after the probe's Close.
	Ledger *Ledger
}

// Reporter receives samples of async ops.
type Reporter interface {
	// Report records one completed async op: intended is when the work was
	// meant to start (latency is measured from it), sent when it actually
	// started (service time), done when it ended.
	Report(op string, intended, sent, done time.Time, out *Outcome, err error)
}

// Backend is everything the rest of the program knows of a backend, in one
// record: each probe package registers one (probes/<name>/register.go) and
// nothing outside it names the backend. The config loader, the engine,
// `dbcanary once`, `dbcanary bench`, the status page and the rule and board
// generator all read it from the registry.
type Backend struct {
	// Name is the backend name used in config (`backend: rabbitmq`), as the
	// key of its config section and as the metrics' backend label.
	Name string
	// NewConfig returns a new config section with defaults set. Its Ops are
	// what the engine schedules, its Endpoints (Endpointer) where the target
	// is: `dbcanary bench` refuses a target off loopback, or one that does not say.
	NewConfig func() Config
	// New builds a probe. It must not do network I/O: connecting belongs in
	// Prepare and Run, so a target that is down still gets a probe and metrics.
	New func(t Target) (Probe, error)
	// Facts are what the generated alert rules, promtool tests and boards
	// know of the backend, and its title. Every backend the daemon links
	// declares them, if only as NoBoard; `dbcanary generate` refuses a
	// backend without them (only a test's backend may leave them out).
	Facts Facts
	// Bench are the reference benchmarks `dbcanary bench` can reproduce
	// with this backend's probe (none: the backend has no bench profile).
	Bench []BenchProfile
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Backend{}
)

// Register makes a backend available to the whole program. It is called
// once, from the init function of the probe's package (register.go), and
// panics on a mistake, so the mistake fails every test and the daemon's start.
func Register(b Backend) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if b.Name == "" || b.NewConfig == nil || b.New == nil {
		panic("probes: incomplete backend registration")
	}
	if _, dup := registry[b.Name]; dup {
		panic(fmt.Sprintf("probes: backend %q registered twice", b.Name))
	}
	for _, p := range b.Bench {
		if p.Name == "" || p.Stages == nil || p.Tables == nil {
			panic(fmt.Sprintf("probes: backend %q: bench profile %q without a name, stages or tables", b.Name, p.Name))
		}
	}
	if b.Facts.Declared() {
		if err := b.Facts.check(); err != nil {
			panic(fmt.Sprintf("probes: facts of backend %q: %v", b.Name, err))
		}
	}
	registry[b.Name] = b
}

// Lookup returns a registered backend.
func Lookup(name string) (Backend, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	b, ok := registry[name]
	return b, ok
}

// Names returns the registered backend names, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Stores names the stores the registered backends probe, by their titles in
// the order of their names ("Cassandra, OpenSearch, RabbitMQ and S3"), for
// the command's help and the landing page; backends without a board are left out.
func Stores() string {
	var titles []string
	for _, name := range Names() {
		if b, _ := Lookup(name); b.Facts.Title != "" {
			titles = append(titles, b.Facts.Title)
		}
	}
	if len(titles) < 2 {
		return strings.Join(titles, "")
	}
	return strings.Join(titles[:len(titles)-1], ", ") + " and " + titles[len(titles)-1]
}

// FieldError is a validation problem in a config section. Field is the path
// relative to the section ("url", "tls.ca_file").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Invalid builds a FieldError.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ErrNamespaceGone marks an op error meaning the canary's namespace (queue,
// index, keyspace) vanished behind its back; the engine runs Prepare again
// before the next op. Wrap it: fmt.Errorf("index gone: %w", probes.ErrNamespaceGone).
var ErrNamespaceGone = errors.New("canary namespace is gone")
