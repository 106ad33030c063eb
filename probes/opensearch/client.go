package opensearch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	osgo "github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/opensearch-project/opensearch-go/v4/opensearchtransport"

	"github.com/dbcanary/dbcanary/probes"
)

// nodeStatsEnv turns off the client's load shedding: by default
// opensearch-go v4.8 polls every node's /_nodes/_local/stats every 5-30 s
// and stops sending to a node whose heap or thread pools look busy. A canary
// sends only the requests it measures, and keeps sending to the busy node:
// that node's latency is what it is there to see. The poller can only be
// turned off through this variable (opensearch.Config does not carry the
// transport's NodeStatsInterval); a value the operator set is kept.
const nodeStatsEnv = "OPENSEARCH_GO_NODE_STATS_INTERVAL"

var noLoadShedding sync.Once

// newClient builds the opensearch-go client: its transport gives retries on
// another node, dead-node resurrection and request timeouts. It does no I/O.
// The HTTP transport is returned too: the node check (nodes.go) shares its
// TLS, timeouts and connections.
func newClient(cfg *Config, auth func(*http.Request), certs probes.CertObserver) (*opensearchapi.Client, *http.Transport, error) {
	// Retries go to another node: with a single address a retry would only
	// hit the same unreachable node again (three dials per op during an outage).
	retries := min(cfg.MaxRetries, len(cfg.Addresses)-1)
	tr := &http.Transport{
		Proxy:                  nil, // a canary measures the store, not a proxy picked up from the environment
		DialContext:            (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ResponseHeaderTimeout:  cfg.RequestTimeout,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		ForceAttemptHTTP2:      false,
		MaxResponseHeaderBytes: 1 << 20, // a broken server's huge header must not cost the canary memory
	}
	if cfg.TLS.Configured() || hasHTTPS(cfg.Addresses) {
		// An empty server name lets crypto/tls check each node's own host name.
		tc, err := cfg.TLS.Build("", certs)
		if err != nil {
			return nil, nil, err
		}
		tr.TLSClientConfig = tc
	}
	noLoadShedding.Do(func() {
		if _, set := os.LookupEnv(nodeStatsEnv); !set {
			_ = os.Setenv(nodeStatsEnv, "-1s")
		}
	})
	off := false
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: osgo.Config{
		Addresses:                  cfg.Addresses,
		Transport:                  servedTransport{tr}, // names the node of a failed op (served.go)
		RequestTimeout:             cfg.RequestTimeout,
		MaxRetries:                 retries,
		DisableRetry:               retries == 0,
		DiscoverNodesOnStart:       &off, // probe exactly the configured nodes
		HealthCheckRequestModifier: auth, // resurrecting a dead node needs credentials too
		EnableMetrics:              true, // each connection's dead or alive: dbcanary_store_node_up (nodes.go)
	}})
	return client, tr, err
}

func hasHTTPS(addrs []string) bool {
	for _, a := range addrs {
		if strings.HasPrefix(a, "https://") {
			return true
		}
	}
	return false
}

// request is one REST call.
type request struct {
	what   string // for errors: "index document", "search"...
	method string
	path   string // already escaped
	query  url.Values
	body   []byte
	ndjson bool
}

// do sends a request and returns the status and body. Transport failures are
// classified; HTTP statuses are left to the caller (see httpError).
func (p *Probe) do(ctx context.Context, r request, out *probes.Outcome) (int, []byte, error) {
	u, err := url.Parse(r.path) // r.path is escaped already: keep it as is
	if err != nil {
		return 0, nil, probes.Fail(probes.CauseOther, fmt.Errorf("opensearch target %s: %s: %v", p.target, r.what, err))
	}
	u.RawQuery = r.query.Encode()
	var body *bytes.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	var req *http.Request
	if body != nil {
		req, err = http.NewRequestWithContext(ctx, r.method, u.String(), body)
	} else {
		req, err = http.NewRequestWithContext(ctx, r.method, u.String(), nil)
	}
	if err != nil {
		return 0, nil, probes.Fail(probes.CauseOther, fmt.Errorf("opensearch target %s: %s: %v", p.target, r.what, err))
	}
	if r.body != nil {
		ct := "application/json"
		if r.ndjson {
			ct = "application/x-ndjson"
		}
		req.Header.Set("Content-Type", ct)
	}
	if err := p.authorize(req); err != nil {
		return 0, nil, err
	}
	if out != nil {
		out.BytesSent += int64(len(r.body))
	}
	// Stream, unlike Perform, does not buffer the body in the transport, so a
	// hostile or broken server cannot make the canary allocate what it claims.
	resp, err := p.client.Client.Stream(req)
	if resp == nil {
		return 0, nil, p.transportError(r.what, err)
	}
	var data bytes.Buffer
	if resp.Body != nil {
		n, rerr := data.ReadFrom(io.LimitReader(resp.Body, maxResponseBytes+1))
		_ = resp.Body.Close()
		if err == nil && rerr != nil {
			err = rerr
		}
		if n > maxResponseBytes {
			return 0, nil, probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: response larger than %d MiB", p.target, r.what, maxResponseBytes>>20))
		}
	}
	if out != nil {
		out.BytesReceived += int64(data.Len())
	}
	if err != nil && resp.StatusCode < 300 {
		return 0, nil, p.transportError(r.what, err)
	}
	return resp.StatusCode, data.Bytes(), nil
}

// authorize sets basic auth, re-reading the password so a rotated secret is used.
func (p *Probe) authorize(req *http.Request) error {
	if p.cfg.Username == "" {
		return nil
	}
	pw, err := p.cfg.Password().Value()
	if err != nil {
		return probes.Fail(probes.CauseAuth, fmt.Errorf("opensearch target %s: password: %w", p.target, err))
	}
	req.SetBasicAuth(p.cfg.Username, pw)
	return nil
}

func (p *Probe) transportError(what string, err error) error {
	wrapped := fmt.Errorf("opensearch target %s: %s: %w", p.target, what, err)
	if errors.Is(err, opensearchtransport.ErrNoConnections) {
		return probes.Fail(probes.CauseRefused, wrapped)
	}
	return probes.Fail(probes.Classify(err), wrapped)
}

// call sends a JSON request, accepts the listed statuses and decodes the body into v (if not nil).
func (p *Probe) call(ctx context.Context, r request, out *probes.Outcome, v any, ok ...int) (int, error) {
	status, body, err := p.do(ctx, r, out)
	if err != nil {
		return 0, err
	}
	accepted := false
	for _, s := range ok {
		accepted = accepted || s == status
	}
	if !accepted {
		return status, p.httpError(r.what, status, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return status, probes.Fail(probes.CauseServer, fmt.Errorf("opensearch target %s: %s: HTTP %d with a body that is not the expected JSON: %v", p.target, r.what, status, err))
		}
	}
	return status, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own plain structs and maps are marshalled here.
		return []byte("{}")
	}
	return b
}

// maxResponseBytes bounds a response body: canary responses are a few KB.
const maxResponseBytes = 16 << 20
