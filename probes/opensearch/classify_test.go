package opensearch

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// The local OpenSearch has no security plugin, so it never answers 401 or
// 403: these tests map those statuses against a small HTTP server on 127.0.0.1.

func testProbe(t *testing.T, addr string, edit func(*Config)) *Probe {
	t.Helper()
	c := DefaultConfig
	c.Addresses = []string{addr}
	c.MaxRetries = 0
	c.RequestTimeout = 2 * time.Second
	c.Username, c.PasswordFile = "canary", "testdata/password"
	if edit != nil {
		edit(&c)
	}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("config: %v", errs)
	}
	p, err := New(probes.Target{Name: "os", InstanceID: "unit-1", Config: &c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func fakeServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return s.URL
}

func runOp(t *testing.T, p *Probe, op string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out probes.Outcome
	return p.Run(ctx, op, &out)
}

func TestHTTPStatusCauses(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   probes.Cause
	}{
		{http.StatusUnauthorized, `{"error":{"type":"security_exception","reason":"missing authentication credentials"},"status":401}`, probes.CauseAuth},
		// The user authenticated but lacks a permission: a setup mistake, not bad credentials.
		{http.StatusForbidden, `{"error":{"type":"security_exception","reason":"no permissions for [indices:admin/create] and User [name=canary, backend_roles=[], requestedTenant=null]"},"status":403}`, probes.CauseSetup},
		// A blocked index (read-only, disk flood stage) is an operational state of the cluster.
		{http.StatusForbidden, `{"error":{"type":"cluster_block_exception","reason":"index [dbcanary-os-2025.01.01] blocked by: [FORBIDDEN/8/index write (api)];"},"status":403}`, probes.CauseServer},
		{http.StatusTooManyRequests, `{"error":{"type":"cluster_block_exception","reason":"index [dbcanary-os-2025.01.01] blocked by: [TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block];"},"status":429}`, probes.CauseServer},
		// The cluster-wide create-index block OpenSearch sets when every node
		// passed the flood stage (make soak-chaos): a cluster state, not a
		// missing permission.
		{http.StatusForbidden, `{"error":{"type":"index_create_block_exception","reason":"blocked by: [FORBIDDEN/10/cluster create-index blocked (api)];"},"status":403}`, probes.CauseServer},
		// The index refuses the canary's documents (a template, an index made by something else).
		{http.StatusBadRequest, `{"error":{"type":"mapper_parsing_exception","reason":"failed to parse field [seq] of type [date]"},"status":400}`, probes.CauseSetup},
		{http.StatusBadRequest, `{"error":{"type":"strict_dynamic_mapping_exception","reason":"mapping set to strict, dynamic introduction of [topic] within [_doc] is not allowed"},"status":400}`, probes.CauseSetup},
		{http.StatusBadRequest, `{"error":{"type":"illegal_argument_exception","reason":"pipeline with id [nope] does not exist"},"status":400}`, probes.CauseSetup},
		{http.StatusBadRequest, `{"error":{"type":"validation_exception","reason":"this action would add [1] total shards, but this cluster currently has [1000]/[1000] maximum shards open"},"status":400}`, probes.CauseServer},
		{http.StatusInternalServerError, `{"error":{"type":"exception","reason":"boom"},"status":500}`, probes.CauseServer},
		{http.StatusBadGateway, `<html>bad gateway</html>`, probes.CauseServer},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status)+" "+string(tc.want), func(t *testing.T) {
			var gotAuth atomic.Value // Prepare's requests and the node check's GET / run at once
			url := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				if u, pw, ok := r.BasicAuth(); ok {
					gotAuth.Store(u + ":" + pw)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			p := testProbe(t, url, nil)
			for _, op := range []string{"prepare", OpSearchTerm, OpIndex} {
				var err error
				if op == "prepare" {
					err = p.Prepare(context.Background())
				} else {
					err = runOp(t, p, op)
				}
				if c := probes.CauseOf(err); c != tc.want {
					t.Fatalf("%s: cause %q, want %q (err: %v)", op, c, tc.want, err)
				}
				if strings.Contains(err.Error(), "secret-pw") {
					t.Fatalf("%s: error shows the password: %v", op, err)
				}
				if !strings.Contains(err.Error(), "opensearch target os") {
					t.Fatalf("%s: error does not name the target: %v", op, err)
				}
			}
			if gotAuth.Load() != "canary:secret-pw" {
				t.Fatalf("server saw basic auth %q, want the configured user and the password file's content", gotAuth.Load())
			}
		})
	}
}

func TestGarbageIsServer(t *testing.T) {
	url := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && !strings.Contains(r.URL.Path, "/_") {
			_, _ = w.Write([]byte(`{"acknowledged":true}`)) // index created
			return
		}
		_, _ = w.Write([]byte(`this is not JSON`))
	})
	err := testProbe(t, url, nil).Prepare(context.Background())
	if c := probes.CauseOf(err); c != probes.CauseServer {
		t.Fatalf("cause %q, want server (err: %v)", c, err)
	}
}

func TestIndexNotFoundIsNamespaceGone(t *testing.T) {
	p := testProbe(t, "http://127.0.0.1:1", nil)
	err := p.httpError("search", 404, []byte(`{"error":{"type":"index_not_found_exception","reason":"no such index [dbcanary-os-2025.01.01]"},"status":404}`))
	if !errors.Is(err, probes.ErrNamespaceGone) || probes.CauseOf(err) != probes.CauseNotFound {
		t.Fatalf("want not_found wrapping ErrNamespaceGone, got %q: %v", probes.CauseOf(err), err)
	}
	err = p.httpError("get", 404, []byte(`{"_index":"x","_id":"y","found":false}`))
	if errors.Is(err, probes.ErrNamespaceGone) {
		t.Fatalf("a missing document is not a missing index: %v", err)
	}
}

func TestRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	err = testProbe(t, addr, nil).Prepare(context.Background())
	if c := probes.CauseOf(err); c != probes.CauseRefused {
		t.Fatalf("cause %q, want refused (err: %v)", c, err)
	}
}

func TestRetryOnAnotherNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	var hits atomic.Int32
	alive := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":{"type":"security_exception","reason":"no"},"status":403}`))
	})
	p := testProbe(t, dead, func(c *Config) { c.Addresses = []string{dead, alive}; c.MaxRetries = 2 })
	for range 3 {
		err = p.Prepare(context.Background())
		if c := probes.CauseOf(err); c != probes.CauseSetup {
			t.Fatalf("cause %q, want setup from the live node's 403 (err: %v)", c, err)
		}
	}
	if hits.Load() == 0 {
		t.Fatal("the live node was never asked")
	}
}

// TestMappingCheckNeedsNoExtraPermission: a user allowed everything but
// reading mappings still gets a working canary (the check is skipped with a
// warning), while a 403 on what the canary needs is setup.
func TestMappingCheckNeedsNoExtraPermission(t *testing.T) {
	url := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_mapping"):
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"type":"security_exception","reason":"no permissions for [indices:admin/mappings/get]"},"status":403}`))
		case r.URL.Path == "/_bulk":
			items := strings.Repeat(`{"index":{"status":201}},`, refCount)
			_, _ = w.Write([]byte(`{"errors":false,"items":[` + strings.TrimSuffix(items, ",") + `]}`))
		case strings.HasPrefix(r.URL.Path, "/_cat/indices"):
			_, _ = w.Write([]byte(`[]`))
		case r.Method == http.MethodPut:
			_, _ = w.Write([]byte(`{"acknowledged":true}`))
		default:
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"type":"security_exception","reason":"no permissions"},"status":403}`))
		}
	})
	p := testProbe(t, url, nil)
	if err := p.Prepare(context.Background()); err != nil {
		t.Fatalf("prepare without the mapping permission: %v", err)
	}
	if err := runOp(t, p, OpGet); probes.CauseOf(err) != probes.CauseSetup {
		t.Fatalf("get refused: cause %q, want setup: %v", probes.CauseOf(err), err)
	}
}

// TestTooManyRequestsIsOverload: a 429 that is not a cluster block is the
// node shedding load; the error says so, names what tripped, and keeps the
// node's own reason. The real server's answers are in test/compat.
func TestTooManyRequestsIsOverload(t *testing.T) {
	p := testProbe(t, "http://127.0.0.1:1", nil)
	cases := []struct{ body, want string }{
		{`{"error":{"type":"circuit_breaking_exception","reason":"[parent] Data too large, data for [<http_request>] would be [1234/1.2kb], which is larger than the limit of [1/1b]","bytes_wanted":1234,"bytes_limit":1,"durability":"TRANSIENT"},"status":429}`,
			"the parent circuit breaker tripped: the store is overloaded"},
		{`{"error":{"type":"circuit_breaking_exception","reason":"[in_flight_requests] Data too large, data for [<http_request>] would be [5/5b], which is larger than the limit of [1/1b]"},"status":429}`,
			"the in_flight_requests circuit breaker tripped"},
		{`{"error":{"type":"rejected_execution_exception","reason":"rejected execution of org.opensearch.common.util.concurrent.TimedRunnable@1 on OpenSearchThreadPoolExecutor[name = node/write, queue capacity = 1]"},"status":429}`,
			"a thread pool's queue is full: the store is overloaded"},
		{`{"error":{"type":"es_rejected_execution_exception","reason":"rejected execution of coordinating operation [coordinating_and_primary_bytes=0, replica_bytes=0, all_bytes=0, coordinating_operation_bytes=250, max_coordinating_and_primary_bytes=1]"},"status":429}`,
			"indexing pressure"},
		{`<html>429 Too Many Requests</html>`, "or a rate limit in front of it"},
	}
	for _, tc := range cases {
		err := p.httpError("bulk", http.StatusTooManyRequests, []byte(tc.body))
		if probes.CauseOf(err) != probes.CauseServer || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "HTTP 429") {
			t.Errorf("429 %s: cause %s, %v; want server containing %q", tc.body, probes.CauseOf(err), err, tc.want)
		}
		var eb errorBody
		if json.Unmarshal([]byte(tc.body), &eb) == nil && eb.Error.Reason != "" && !strings.Contains(err.Error(), eb.Error.Reason[:40]) {
			t.Errorf("the node's reason is missing: %v", err)
		}
	}
	// A cluster block answered with 429 stays a block, not an overload.
	err := p.httpError("bulk", http.StatusTooManyRequests, []byte(`{"error":{"type":"cluster_block_exception","reason":"index [x] blocked by: [TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block];"},"status":429}`))
	if strings.Contains(err.Error(), "overloaded") || !strings.Contains(err.Error(), "blocked") {
		t.Errorf("flood-stage block: %v", err)
	}
}
