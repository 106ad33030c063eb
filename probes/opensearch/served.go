package opensearch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/dbcanary/dbcanary/probes"
)

// Which node a failed op went to: the client picks a node per request (round
// robin over the live addresses, the next one on a retry), so an error that
// names only the target cannot tell a sick node from the others. The client's
// HTTP transport is wrapped (servedTransport): each request an op sends,
// retries included, records the node it went to (host:port of the address,
// as in dbcanary_store_node_up), and a failed op of a target with more than
// one address names them: "... HTTP 503 ... (node 127.0.0.1:9201)". The
// wrapper returns what the transport returned, untouched: the client's retry
// logic sees the same responses and errors.

// maxServedNodes bounds the nodes one op records (its requests and retries).
const maxServedNodes = 3

type servedKey struct{}

// servedBy are the nodes an op's requests went to, in order, without repeats.
type servedBy struct {
	mu    sync.Mutex
	nodes []string
}

func (s *servedBy) add(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if n == node {
			return
		}
	}
	if len(s.nodes) < maxServedNodes {
		s.nodes = append(s.nodes, node)
	}
}

func (s *servedBy) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.nodes...)
}

// withServedBy returns ctx carrying a fresh record of the op's nodes.
func withServedBy(ctx context.Context) (context.Context, *servedBy) {
	s := &servedBy{}
	return context.WithValue(ctx, servedKey{}, s), s
}

// servedTransport records each request's node in the record its context
// carries, if any, and sends it with the wrapped transport.
type servedTransport struct{ rt http.RoundTripper }

func (t servedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if s, ok := req.Context().Value(servedKey{}).(*servedBy); ok && req.URL != nil {
		s.add(req.URL.Host)
	}
	return t.rt.RoundTrip(req)
}

// nameServedNodes adds the nodes a failed op's requests went to to its
// error, keeping its cause, when the target has more than one address (with
// one, it is the node). No request was sent (no live connection, the
// deadline passed first): the error is left as it is.
func nameServedNodes(err error, nodes []string, addresses int) error {
	if err == nil || len(nodes) == 0 || addresses < 2 {
		return err
	}
	what := "node " + nodes[0]
	if len(nodes) > 1 {
		what = "nodes " + strings.Join(nodes, ", then ")
	}
	cause := probes.CauseOf(err)
	var pe *probes.Error
	if errors.As(err, &pe) {
		err = pe.Err // keep one probes.Error in the chain, the outer one
	}
	return probes.Fail(cause, fmt.Errorf("%w (%s)", err, what))
}
