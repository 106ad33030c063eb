package probes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Which node a failed op went to: a driver picks a node per request (token
// aware, round robin, the next one on a retry), so an error that names only
// the target cannot tell a sick node from the others. A probe puts a
// NodeTrail in the op's context (WithNodeTrail); the driver's hook (gocql's
// query observer, a wrapped HTTP transport) adds the node of each request it
// sends (NodeTrailFrom(ctx).Add), and a failed op of a target with several
// nodes names them (NameNodes): "... (coordinator 127.0.0.12:9042)".

// MaxTrailNodes bounds the nodes one op records (its attempts, retries, pages).
const MaxTrailNodes = 3

type nodeTrailKey struct{}

// NodeTrail is the nodes an op's requests went to, in order, without repeats.
type NodeTrail struct {
	mu    sync.Mutex
	nodes []string
}

// WithNodeTrail returns ctx carrying a fresh trail for one op.
func WithNodeTrail(ctx context.Context) (context.Context, *NodeTrail) {
	t := &NodeTrail{}
	return context.WithValue(ctx, nodeTrailKey{}, t), t
}

// NodeTrailFrom is the trail ctx carries; nil (which Add ignores) if none.
func NodeTrailFrom(ctx context.Context) *NodeTrail {
	if ctx == nil {
		return nil
	}
	t, _ := ctx.Value(nodeTrailKey{}).(*NodeTrail)
	return t
}

// Add records a node, once, up to MaxTrailNodes. A nil trail ignores it.
func (t *NodeTrail) Add(node string) {
	if t == nil || node == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if n == node {
			return
		}
	}
	if len(t.nodes) < MaxTrailNodes {
		t.nodes = append(t.nodes, node)
	}
}

// List returns the recorded nodes in order.
func (t *NodeTrail) List() []string {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.nodes...)
}

// NameNodes adds the nodes a failed op went to to its error, keeping its
// cause and the driver's error in the chain: "(<role> a)" or "(<role>s a,
// then b)". It leaves err as it is when the target has one node (the error's
// address already names it) or no request reached a node (no connection, the
// deadline passed first).
func NameNodes(err error, nodes []string, several bool, role string) error {
	if err == nil || len(nodes) == 0 || !several {
		return err
	}
	what := role + " " + nodes[0]
	if len(nodes) > 1 {
		what = role + "s " + strings.Join(nodes, ", then ")
	}
	cause := CauseOf(err)
	var pe *Error
	if errors.As(err, &pe) {
		err = pe.Err // keep one probes.Error in the chain, the outer one
	}
	return Fail(cause, fmt.Errorf("%w (%s)", err, what))
}
