package cassandra

import (
	"iter"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// liveSession is the session NodeStates reads, without the probe's lock
// (held across a connect, which a scrape must not wait for).
type liveSession struct {
	sess   *gocql.Session
	filter gocql.HostFilter // pin_hosts: only these nodes are the target's; nil: every node
	conns  *connTrack
}

// connTrack counts, per node (host:port as dialled), the driver's connections
// that have answered at least one frame and are not closed. The driver's own
// host state misses a node behind an address other than the one it gossips
// (broadcast_rpc_address != broadcast_address: a proxy or NAT): it looks the
// failed node up by the address it connects to in a ring keyed by the gossip
// address, finds nothing, and leaves it up (gocql v2.1.2, fillingStopped ->
// handleNodeDown). Its pool still loses its last connection: that is seen here.
type connTrack struct {
	mu   sync.Mutex
	open map[string]int
}

func newConnTrack() *connTrack { return &connTrack{open: map[string]int{}} }

func (c *connTrack) add(node string, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[node] += d
	if c.open[node] <= 0 {
		delete(c.open, node)
	}
}

func (c *connTrack) connected(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[node] > 0
}

// NodeStates reports the nodes of the ring the target may use (host:port as
// the driver connects to them) and whether each is up: the driver holds an
// open connection to it that has answered (connTrack), and the driver has not
// marked it down (its gossip said DOWN). A node killed is down as soon as its
// connections close; up again once the driver reconnects (the next request
// routed to it, or the driver's reconnect loop). Nothing while the target has
// no session (before its first connect, or after the whole ring was
// unreachable for noHostsRebuild).
func (p *Probe) NodeStates() iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		l := p.live.Load()
		if l == nil || l.sess.Closed() {
			return
		}
		for _, h := range l.sess.GetHosts() {
			if l.filter != nil && !l.filter.Accept(h) {
				continue
			}
			node := h.ConnectAddressAndPort()
			if !yield(node, h.IsUp() && l.conns.connected(node)) {
				return
			}
		}
	}
}
