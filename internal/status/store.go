// Package status keeps what the status page shows: per target and op, the
// state (ok, failing, not yet run), the last success, failures by cause over
// the last minutes, the last few error messages and p50/p99 latency over the
// last five minutes. It implements engine.Observer.
//
// Memory is fixed per op whatever the op rate or error rate (minute rings of
// counters, a small latency histogram per minute, a ring of MaxMessages
// messages of at most MaxMessageBytes). Recording takes only the op's own
// short lock; the target list is a sync.Map (lock-free reads), so neither a
// sample nor a page render waits for anything engine-wide, and a render never
// blocks an op for longer than copying that op's state.
package status

import (
	"errors"
	"iter"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// Defaults.
const (
	DefaultFailureWindow = 10 * time.Minute
	maxFailureWindow     = time.Hour
	// MaxMessages is how many distinct recent error messages are kept per op
	// (consecutive repeats of one message are folded into a count).
	MaxMessages = 5
)

// State of an op or a target.
type State string

// States.
const (
	StateOK        State = "ok"
	StateFailing   State = "failing"
	StateNotYetRun State = "not_yet_run"
)

// Options configures a Store.
type Options struct {
	// FailureWindow is how far back failures are counted, in whole minutes
	// (default DefaultFailureWindow, at most an hour).
	FailureWindow time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Ledgers is the store of the targets' durability ledgers
	// (engine.Ledgers); nil shows no ledger.
	Ledgers *probes.LedgerStore
}

// Store is the status page's state. Its methods are safe for concurrent use.
type Store struct {
	now         func() time.Time
	failMinutes int
	ledgers     *probes.LedgerStore

	writeMu sync.Mutex // serialises TargetStarted's read-modify-write of a target
	targets sync.Map   // name -> *target; read without a lock

	daemonMu sync.Mutex
	daemon   Daemon
}

type target struct {
	name, backend, namespace string
	started                  time.Time
	ops                      []*op
	cert                     atomic.Pointer[CertStatus] // the earliest TLS certificate expiry seen
	nodes                    atomic.Pointer[nodeSource] // the store's nodes as the probe's driver sees them, if it knows
}

type nodeSource struct {
	states func() iter.Seq2[string, bool]
}

// MaxNodes bounds the nodes a target shows, down ones first (as
// dbcanary_store_node_up).
const MaxNodes = 64

// NodeStatus is one node of the store as the target's driver sees it.
type NodeStatus struct {
	Node string `json:"node"`
	Up   bool   `json:"up"`
}

// TargetNodes implements engine.NodeObserver: states is read at each snapshot.
func (s *Store) TargetNodes(name string, states func() iter.Seq2[string, bool]) {
	if v, ok := s.targets.Load(name); ok && states != nil {
		v.(*target).nodes.Store(&nodeSource{states})
	}
}

// nodeList reads the target's nodes: down ones first, then by address, at
// most MaxNodes; nil if the probe does not know its nodes.
func (t *target) nodeList() []NodeStatus {
	src := t.nodes.Load()
	if src == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []NodeStatus
	for node, up := range src.states() {
		if !seen[node] {
			seen[node] = true
			out = append(out, NodeStatus{node, up})
		}
	}
	slices.SortFunc(out, func(a, b NodeStatus) int {
		if a.Up != b.Up {
			if !a.Up {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Node, b.Node)
	})
	if len(out) > MaxNodes {
		out = out[:MaxNodes]
	}
	return out
}

// CertStatus is the first certificate to expire among those the target's
// store presented over TLS.
type CertStatus struct {
	NotAfter time.Time `json:"not_after"`
	Subject  string    `json:"subject"`
}

// CertExpiry implements engine.CertObserver.
func (s *Store) CertExpiry(name string, notAfter time.Time, subject string) {
	if v, ok := s.targets.Load(name); ok {
		v.(*target).cert.Store(&CertStatus{NotAfter: notAfter, Subject: subject})
	}
}

func (t *target) op(name string) *op {
	for _, o := range t.ops {
		if o.name == name {
			return o
		}
	}
	return nil
}

type op struct {
	name string

	mu          sync.Mutex // guards everything below; held only to record or copy
	ran         bool
	failing     bool
	since       time.Time // when the current state (ok or failing) began
	lastSuccess time.Time
	lastFailure time.Time
	lastCause   probes.Cause
	fails       failRing
	lat         latRing
	msgs        [MaxMessages]message // ring, msgs[head] the newest
	head, nmsgs int
}

type message struct {
	first, last time.Time
	count       uint64
	cause       probes.Cause
	text        string
}

// New returns an empty store.
func New(o Options) *Store {
	s := &Store{now: o.Now, failMinutes: int(DefaultFailureWindow / time.Minute), ledgers: o.Ledgers}
	if s.now == nil {
		s.now = time.Now
	}
	if o.FailureWindow > 0 {
		s.failMinutes = int(min(max(o.FailureWindow, time.Minute), maxFailureWindow) / time.Minute)
	}
	s.daemon.Started = s.now()
	return s
}

// FailureWindow is how far back failures are counted.
func (s *Store) FailureWindow() time.Duration { return time.Duration(s.failMinutes) * time.Minute }

// TargetStarted implements engine.Observer. A target restarted by a reload
// keeps the history of the ops it still has.
func (s *Store) TargetStarted(name, backend string, ops []string, namespace string) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var prev *target
	if v, ok := s.targets.Load(name); ok {
		prev = v.(*target)
	}
	t := &target{name: name, backend: backend, namespace: namespace, started: s.now()}
	for _, n := range ops {
		if prev != nil && prev.backend == backend {
			if o := prev.op(n); o != nil {
				t.ops = append(t.ops, o)
				continue
			}
		}
		t.ops = append(t.ops, &op{name: n, fails: newFailRing(s.failMinutes)})
	}
	s.targets.Store(name, t)
}

// TargetStopped implements engine.Observer.
func (s *Store) TargetStopped(name string) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.targets.Delete(name)
}

// OpRecorded implements engine.Observer: one sample, err nil on success.
func (s *Store) OpRecorded(targetName, _, opName string, end time.Time, latency time.Duration, cause probes.Cause, err error) {
	v, ok := s.targets.Load(targetName)
	if !ok {
		return
	}
	o := v.(*target).op(opName)
	if o == nil {
		return
	}
	var text string
	if err != nil {
		if cause == "" {
			cause = probes.CauseOf(err)
		}
		text = Redact(err.Error())
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	failed := err != nil
	if !o.ran || o.failing != failed {
		o.since = end
	}
	o.ran, o.failing = true, failed
	o.fails.add(end, cause, failed)
	if !failed {
		o.lastSuccess = end
		o.lat.add(end, latency)
		return
	}
	o.lastFailure, o.lastCause = end, cause
	if o.nmsgs > 0 {
		if m := &o.msgs[o.head]; m.cause == cause && m.text == text {
			m.last = end
			m.count++
			return
		}
		o.head = (o.head + 1) % MaxMessages
	}
	o.msgs[o.head] = message{first: end, last: end, count: 1, cause: cause, text: text}
	o.nmsgs = min(o.nmsgs+1, MaxMessages)
}

// Daemon describes the process for the page header.
type Daemon struct {
	Build      BuildInfo `json:"build"`
	InstanceID string    `json:"instance_id"`
	ConfigFile string    `json:"config_file,omitempty"`
	Shard      Shard     `json:"shard"`
	Started    time.Time `json:"started"`
	Reload     Reload    `json:"config_reload"`
}

// BuildInfo is the binary's version (prometheus/common/version).
type BuildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Branch    string `json:"branch,omitempty"`
	BuildUser string `json:"build_user,omitempty"`
	BuildDate string `json:"build_date,omitempty"`
	GoVersion string `json:"go_version"`
}

// Shard is this replica's share of the targets.
type Shard struct {
	Index   int    `json:"index"`
	Count   int    `json:"count"` // 1: no sharding
	Vantage string `json:"vantage,omitempty"`
}

// Reload is the state of the last config load.
type Reload struct {
	Success bool      `json:"success"`
	At      time.Time `json:"at,omitzero"`
	// Error is why the last reload was rejected (the previous config keeps running).
	Error string `json:"error,omitempty"`
	// LastSuccess is when a config was last applied.
	LastSuccess time.Time `json:"last_success,omitzero"`
}

// SetDaemon sets what the header shows; Started and Reload are kept.
func (s *Store) SetDaemon(d Daemon) {
	s.daemonMu.Lock()
	defer s.daemonMu.Unlock()
	d.Started, d.Reload = s.daemon.Started, s.daemon.Reload
	s.daemon = d
}

// SetInstanceID updates the instance id (a reload may change it).
func (s *Store) SetInstanceID(id string) {
	s.daemonMu.Lock()
	defer s.daemonMu.Unlock()
	s.daemon.InstanceID = id
}

// ConfigLoaded records a config load or reload: err nil if it was applied.
func (s *Store) ConfigLoaded(err error) {
	now := s.now()
	s.daemonMu.Lock()
	defer s.daemonMu.Unlock()
	r := &s.daemon.Reload
	r.At, r.Success, r.Error = now, err == nil, ""
	if err != nil {
		r.Error = Redact(errText(err))
	} else {
		r.LastSuccess = now
	}
}

// errText joins a multi-error's lines with "; " so it reads on one line.
func errText(err error) string {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		var parts []string
		for _, e := range j.Unwrap() {
			parts = append(parts, e.Error())
		}
		return strings.Join(parts, "; ")
	}
	return err.Error()
}

// Snapshot is the whole status at one instant: what /status.json serves.
type Snapshot struct {
	Generated            time.Time      `json:"generated"`
	Daemon               Daemon         `json:"daemon"`
	FailureWindowSeconds float64        `json:"failure_window_seconds"`
	LatencyWindowSeconds float64        `json:"latency_window_seconds"`
	Summary              Summary        `json:"summary"`
	Targets              []TargetStatus `json:"targets"`
}

// Summary counts targets by state.
type Summary struct {
	Targets   int `json:"targets"`
	OK        int `json:"ok"`
	Failing   int `json:"failing"`
	NotYetRun int `json:"not_yet_run"`
}

// TargetStatus is one target: failing if any op is, ok if every op that ran
// succeeded last, not yet run if no op has.
type TargetStatus struct {
	Name      string `json:"name"`
	Backend   string `json:"backend"`
	Namespace string `json:"namespace,omitempty"`
	// TLSCert is the first certificate the store presented to expire; nil
	// for a plaintext target or before the first TLS handshake.
	TLSCert *CertStatus `json:"tls_cert,omitempty"`
	// Nodes are the store's nodes as the target's driver sees them (down
	// ones first; dbcanary_store_node_up), for probes that know them.
	Nodes   []NodeStatus `json:"nodes,omitempty"`
	State   State        `json:"state"`
	Started time.Time    `json:"started"`
	Ops     []OpStatus   `json:"ops"`
	// Ledger is the target's durability ledger, when it runs one (its
	// ledger ops are on, or it still holds or has checked entries).
	Ledger *probes.LedgerStatus `json:"ledger,omitempty"`
}

// OpStatus is one op of a target.
type OpStatus struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Since is when the current state began (the first failure of a failing
	// streak, the first success after one); zero if not yet run.
	Since       time.Time    `json:"since,omitzero"`
	LastSuccess time.Time    `json:"last_success,omitzero"`
	LastFailure time.Time    `json:"last_failure,omitzero"`
	LastCause   probes.Cause `json:"last_cause,omitempty"`
	// Runs and Failures count outcomes in the failure window; Causes splits
	// Failures by cause (only causes seen, in the fixed cause order).
	Runs     uint64       `json:"runs"`
	Failures uint64       `json:"failures"`
	Causes   []CauseCount `json:"causes"`
	Latency  Latency      `json:"latency"`
	// Errors are the last distinct error messages, newest first.
	Errors []ErrorEntry `json:"errors"`
}

// CauseCount is how many failures had one cause.
type CauseCount struct {
	Cause probes.Cause `json:"cause"`
	Count uint64       `json:"count"`
}

// Latency is successful ops' latency over the latency window.
type Latency struct {
	Samples    uint64  `json:"samples"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
	MaxSeconds float64 `json:"max_seconds"`
	// P50, P99 and Max are the same as durations (for the page).
	P50, P99, Max time.Duration `json:"-"`
}

// ErrorEntry is a recent error message; consecutive repeats are one entry.
type ErrorEntry struct {
	First   time.Time    `json:"first"`
	Last    time.Time    `json:"last"`
	Count   uint64       `json:"count"`
	Cause   probes.Cause `json:"cause"`
	Message string       `json:"message"`
}

// Snapshot copies the current state, targets sorted by name.
func (s *Store) Snapshot() Snapshot {
	now := s.now()
	s.daemonMu.Lock()
	d := s.daemon
	s.daemonMu.Unlock()
	out := Snapshot{
		Generated:            now,
		Daemon:               d,
		FailureWindowSeconds: s.FailureWindow().Seconds(),
		LatencyWindowSeconds: LatencyWindow.Seconds(),
		Targets:              []TargetStatus{},
	}
	var ledgers map[[2]string]probes.LedgerStatus
	if s.ledgers != nil {
		ledgers = s.ledgers.Statuses(now)
	}
	s.targets.Range(func(_, v any) bool {
		t := v.(*target)
		ts := t.snapshot(now)
		if l, ok := ledgers[[2]string{t.name, t.backend}]; ok && (t.op(probes.OpLedgerWrite) != nil || t.op(probes.OpLedgerCheck) != nil || l.Entries > 0 || l.Intact()+l.Losses() > 0) {
			lc := l // only a shown ledger is copied to the heap
			ts.Ledger = &lc
		}
		out.Targets = append(out.Targets, ts)
		return true
	})
	sort.Slice(out.Targets, func(i, j int) bool { return out.Targets[i].Name < out.Targets[j].Name })
	for _, t := range out.Targets {
		out.Summary.Targets++
		switch t.State {
		case StateOK:
			out.Summary.OK++
		case StateFailing:
			out.Summary.Failing++
		default:
			out.Summary.NotYetRun++
		}
	}
	return out
}

func (t *target) snapshot(now time.Time) TargetStatus {
	ts := TargetStatus{Name: t.name, Backend: t.backend, Namespace: t.namespace, Started: t.started,
		State: StateNotYetRun, Ops: make([]OpStatus, len(t.ops)), TLSCert: t.cert.Load(), Nodes: t.nodeList()}
	for i, o := range t.ops {
		ts.Ops[i] = o.snapshot(now)
		switch ts.Ops[i].State {
		case StateFailing:
			ts.State = StateFailing
		case StateOK:
			if ts.State == StateNotYetRun {
				ts.State = StateOK
			}
		}
	}
	return ts
}

func (o *op) snapshot(now time.Time) OpStatus {
	o.mu.Lock()
	st := OpStatus{Name: o.name, State: StateNotYetRun, LastSuccess: o.lastSuccess,
		LastFailure: o.lastFailure, LastCause: o.lastCause}
	if o.ran {
		st.Since, st.State = o.since, StateOK
		if o.failing {
			st.State = StateFailing
		}
	}
	byCause := make([]uint64, numCauses)
	ok := o.fails.sum(now, byCause)
	lat := o.lat.merge(now)
	if o.nmsgs > 0 {
		st.Errors = make([]ErrorEntry, 0, o.nmsgs)
		for i := range o.nmsgs {
			m := o.msgs[(o.head-i+MaxMessages)%MaxMessages]
			st.Errors = append(st.Errors, ErrorEntry{First: m.first, Last: m.last, Count: m.count, Cause: m.cause, Message: m.text})
		}
	}
	o.mu.Unlock()

	for i, n := range byCause {
		if n > 0 {
			st.Failures += n
			st.Causes = append(st.Causes, CauseCount{Cause: probes.Causes[i], Count: n})
		}
	}
	st.Runs = ok + st.Failures
	if lat.n > 0 {
		p50, p99 := lat.quantile(0.5), lat.quantile(0.99)
		st.Latency = Latency{Samples: lat.n, P50: p50, P99: p99, Max: lat.max,
			P50Seconds: p50.Seconds(), P99Seconds: p99.Seconds(), MaxSeconds: lat.max.Seconds()}
	}
	if st.Causes == nil {
		st.Causes = []CauseCount{}
	}
	if st.Errors == nil {
		st.Errors = []ErrorEntry{}
	}
	return st
}

// Failing returns the failing targets of a snapshot, for the page's summary.
func (s *Snapshot) Failing() []TargetStatus {
	var out []TargetStatus
	for _, t := range s.Targets {
		if t.State == StateFailing {
			out = append(out, t)
		}
	}
	return out
}

// SortForPage orders targets failing first, then not yet run, then ok, by name within each.
func (s *Snapshot) SortForPage() {
	rank := map[State]int{StateFailing: 0, StateNotYetRun: 1, StateOK: 2}
	slices.SortStableFunc(s.Targets, func(a, b TargetStatus) int { return rank[a.State] - rank[b.State] })
}
