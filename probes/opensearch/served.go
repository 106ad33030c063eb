package opensearch

import (
	"errors"
	"io"
	"net/http"

	"github.com/dbcanary/dbcanary/probes"
)

// Which node a failed op went to: the client picks a node per request (round
// robin over the live addresses, the next one on a retry), so an error that
// names only the target cannot tell a sick node from the others. Run puts a
// probes.NodeTrail in the op's context; the client's HTTP transport is
// wrapped (servedTransport) so each request the op sends, retries included,
// adds its node (host:port of the address, as in dbcanary_store_node_up), and
// a failed op of a target with more than one address names them
// (probes.NameNodes): "... HTTP 503 ... (node 127.0.0.1:9201)". The wrapper
// returns what the transport returned, untouched: the client's retry logic
// sees the same responses and errors.

// servedTransport adds each request's node to the trail its context
// carries, if any, and sends it with the wrapped transport.
type servedTransport struct{ rt http.RoundTripper }

func (t servedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL != nil {
		probes.NodeTrailFrom(req.Context()).Add(req.URL.Host)
	}
	resp, err := t.rt.RoundTrip(req)
	if resp != nil && resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &boundedBody{rc: resp.Body, left: maxResponseBytes + 1}
	}
	return resp, err
}

// errResponseTooLarge ends a response body past maxResponseBytes.
var errResponseTooLarge = errors.New("response body larger than 16 MiB")

// boundedBody fails a body after maxResponseBytes+1 bytes. The client reads
// some responses itself, whole and with no bound: the health check that
// resurrects a dead node, the cluster health refresh of a multi-node
// target. A broken or hostile server streaming without end made it buffer
// the lot (test/hostile: +100-200 MiB of heap, kept after Close). Bounding
// the body here covers every request the client sends; Probe.do reads up to
// maxResponseBytes+1 and names the target when a response is too large.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// CloseIdleConnections passes the client's Close on to the wrapped
// transport: the client closes its idle connections only through a
// transport that has this method (without it test/leak found their
// goroutines left after Close).
func (t servedTransport) CloseIdleConnections() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// nameServedNodes adds the nodes a failed op's requests went to to its error
// when the target has more than one address.
func nameServedNodes(err error, nodes []string, addresses int) error {
	return probes.NameNodes(err, nodes, addresses > 1, "node")
}
