package cassandra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// Which node coordinated a failed op: the driver picks a coordinator per
// request (token-aware, round robin), so an error that names only the
// target's contact points cannot tell a sick node from the others. The
// session's query observer records, per op, the node each attempt went to
// (host:port as the driver connects, as in dbcanary_store_node_up), and a
// failed op on a ring of more than one node names them:
// "... (coordinator 127.0.0.12:9042)".

// maxCoordinators bounds the nodes one op records (its attempts and, for a
// paged read, its pages).
const maxCoordinators = 3

type coordKey struct{}

// coordinators are the nodes an op's attempts went to, in order, without repeats.
type coordinators struct {
	mu    sync.Mutex
	nodes []string
}

func (c *coordinators) add(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n == node {
			return
		}
	}
	if len(c.nodes) < maxCoordinators {
		c.nodes = append(c.nodes, node)
	}
}

func (c *coordinators) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.nodes...)
}

// withCoordinators returns ctx carrying a fresh record of the op's coordinators.
func withCoordinators(ctx context.Context) (context.Context, *coordinators) {
	c := &coordinators{}
	return context.WithValue(ctx, coordKey{}, c), c
}

// coordObserver is the session's gocql.QueryObserver: each attempt's node
// goes to the record in the query's context, if the op carries one.
type coordObserver struct{}

func (coordObserver) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	if ctx == nil || q.Host == nil {
		return
	}
	if c, ok := ctx.Value(coordKey{}).(*coordinators); ok {
		c.add(q.Host.ConnectAddressAndPort())
	}
}

// nameCoordinators adds the nodes that coordinated a failed op to its error,
// keeping its cause, when the ring has more than one node (with one, the
// error's contact point already names it). No attempt reached a node (no
// connection, the deadline passed first): the error is left as it is.
func nameCoordinators(err error, nodes []string, ringSize int) error {
	if err == nil || len(nodes) == 0 || ringSize < 2 {
		return err
	}
	what := "coordinator " + nodes[0]
	if len(nodes) > 1 {
		what = "coordinators " + strings.Join(nodes, ", then ")
	}
	cause := probes.CauseOf(err)
	var pe *probes.Error
	if errors.As(err, &pe) {
		err = pe.Err // keep one probes.Error in the chain, the outer one
	}
	return probes.Fail(cause, fmt.Errorf("%w (%s)", err, what))
}
