package engine

import (
	"iter"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// Observer sees every recorded op outcome, after its metrics. It runs on the
// op's goroutine: it must be cheap and must never block (the status page keeps
// a small bounded window per op behind its own short lock).
type Observer interface {
	// OpStarted announces a target's ops when the target starts (or restarts
	// after a reload) so they show as "not yet run" before their first sample.
	TargetStarted(target, backend string, ops []string, namespace string)
	// TargetStopped is called when a target leaves the config.
	TargetStopped(target string)
	// OpRecorded is one sample: latency from the intended start, err nil on success.
	OpRecorded(target, backend, op string, end time.Time, latency time.Duration, cause probes.Cause, err error)
}

// SetObserver installs o (nil removes it). Call it before Apply.
func (e *Engine) SetObserver(o Observer) { e.observer = o }

// Namespacer is implemented by probes that can name the canary's namespace in
// the store (queue, keyspace, index prefix, bucket prefix) for the status page.
type Namespacer interface {
	Namespace() string
}

// NodeStater is implemented by probes whose driver knows the store's nodes
// and whether each is up (a ring): dbcanary_store_node_up, read at
// every scrape. It must be cheap and never block on the network.
type NodeStater interface {
	NodeStates() iter.Seq2[string, bool]
}

// NodeObserver is implemented by an Observer that also shows the store's
// nodes (the status page): TargetNodes hands it a target's NodeStates after
// TargetStarted, to read when it renders. It is not called for probes that
// do not know their nodes.
type NodeObserver interface {
	TargetNodes(target string, states func() iter.Seq2[string, bool])
}
