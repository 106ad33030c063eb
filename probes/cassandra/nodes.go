package cassandra

import (
	"iter"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// liveSession is the session NodeStates reads, without the probe's lock
// (held across a connect, which a scrape must not wait for).
type liveSession struct {
	sess   *gocql.Session
	filter gocql.HostFilter // pin_hosts: only these nodes are the target's; nil: every node
}

// NodeStates reports the nodes of the ring the target may use (host:port as
// the driver connects to them) and whether the driver sees each up: a node is
// marked down when its connection pool loses its last connection and cannot
// refill it, or when another node's gossip reports it down; up again once the
// driver reconnects. Nothing while the target has no session (before its first
// connect, or after the whole ring was unreachable for noHostsRebuild).
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
			if !yield(h.ConnectAddressAndPort(), h.IsUp()) {
				return
			}
		}
	}
}
