package cassandra

import (
	"context"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// Which node coordinated a failed op: the driver picks a coordinator per
// request (token-aware, round robin), so an error that names only the
// target's contact points cannot tell a sick node from the others. Run puts a
// probes.NodeTrail in the op's context; the session's query observer adds the
// node each attempt went to (host:port as the driver connects, as in
// dbcanary_store_node_up), and a failed op on a ring of more than one node
// names them (probes.NameNodes): "... (coordinator 127.0.0.12:9042)".

// coordObserver is the session's gocql.QueryObserver: each attempt's node
// goes to the trail in the query's context, if the op carries one.
type coordObserver struct{}

func (coordObserver) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	if q.Host == nil {
		return
	}
	probes.NodeTrailFrom(ctx).Add(q.Host.ConnectAddressAndPort())
}

// nameCoordinators adds the nodes that coordinated a failed op to its error
// when the ring has more than one node.
func nameCoordinators(err error, nodes []string, ringSize int) error {
	return probes.NameNodes(err, nodes, ringSize > 1, "coordinator")
}
