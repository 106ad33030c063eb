package opensearch

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// failingNode is a node that answers every request with status and an
// OpenSearch error body, counting them.
func failingNode(t *testing.T, status int, hits *atomic.Int64) (addr, host string) {
	t.Helper()
	addr = fakeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"type":"unavailable_shards_exception","reason":"primary shard is not active"}}`))
	}))
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	return addr, u.Host
}

// A failed op of a target with several addresses names the node its request
// went to; with a retry on the other node, both, in order.
func TestFailedOpNamesNode(t *testing.T) {
	var hitsA, hitsB atomic.Int64
	a, hostA := failingNode(t, http.StatusInternalServerError, &hitsA)
	b, hostB := failingNode(t, http.StatusInternalServerError, &hitsB)
	p := testProbe(t, a, func(c *Config) { c.Addresses = []string{a, b} })
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		beforeA, beforeB := hitsA.Load(), hitsB.Load()
		err := runOp(t, p, OpIndex)
		if err == nil {
			t.Fatal("op succeeded against nodes answering 500")
		}
		if probes.CauseOf(err) != probes.CauseServer {
			t.Errorf("cause %s, want server: %v", probes.CauseOf(err), err)
		}
		var want string
		switch {
		case hitsA.Load() > beforeA && hitsB.Load() == beforeB:
			want = "(node " + hostA + ")"
		case hitsB.Load() > beforeB && hitsA.Load() == beforeA:
			want = "(node " + hostB + ")"
		default:
			t.Fatalf("op %d went to both nodes without retries (hits %d, %d)", i, hitsA.Load(), hitsB.Load())
		}
		if !strings.HasSuffix(err.Error(), want) {
			t.Errorf("error %q does not end with %q", err, want)
		}
		seen[want] = true
		t.Log(err)
	}
	if len(seen) != 2 {
		t.Errorf("4 ops named %v: the client's round robin should have used both nodes", seen)
	}
}

func TestFailedOpNamesRetriedNodes(t *testing.T) {
	var hitsA, hitsB atomic.Int64
	a, hostA := failingNode(t, http.StatusServiceUnavailable, &hitsA)
	b, hostB := failingNode(t, http.StatusServiceUnavailable, &hitsB)
	p := testProbe(t, a, func(c *Config) { c.Addresses, c.MaxRetries = []string{a, b}, 1 })
	err := runOp(t, p, OpIndex)
	if err == nil {
		t.Fatal("op succeeded against nodes answering 503")
	}
	if !strings.HasSuffix(err.Error(), "(nodes "+hostA+", then "+hostB+")") && !strings.HasSuffix(err.Error(), "(nodes "+hostB+", then "+hostA+")") {
		t.Errorf("error %q does not name both nodes in order (a 503 is retried on the other node)", err)
	}
}

// With one address the node is the target's: nothing is added.
func TestFailedOpOneAddressNamesNoNode(t *testing.T) {
	var hits atomic.Int64
	a, _ := failingNode(t, http.StatusInternalServerError, &hits)
	p := testProbe(t, a, nil)
	err := runOp(t, p, OpIndex)
	if err == nil || strings.Contains(err.Error(), "(node") {
		t.Errorf("error %v: want a failure naming no node", err)
	}
}

func TestNameServedNodesKeepsCause(t *testing.T) {
	base := probes.Fail(probes.CauseTimeout, errString("deadline"))
	got := nameServedNodes(base, []string{"n1:9200"}, 3)
	if probes.CauseOf(got) != probes.CauseTimeout || got.Error() != "deadline (node n1:9200)" {
		t.Errorf("got %v (cause %s)", got, probes.CauseOf(got))
	}
	if nameServedNodes(nil, []string{"n1"}, 3) != nil || nameServedNodes(base, nil, 3) != base || nameServedNodes(base, []string{"n1"}, 1) != base {
		t.Error("an error without nodes, or of a one-address target, must be left as it is")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// The client's Close reaches the HTTP transport through the wrapper.
func TestServedTransportClosesIdleConnections(t *testing.T) {
	var rt http.RoundTripper = servedTransport{&http.Transport{}}
	if _, ok := rt.(interface{ CloseIdleConnections() }); !ok {
		t.Fatal("servedTransport hides CloseIdleConnections: the client's Close would leave idle connections open")
	}
}

// The client sends the canary's requests and nothing else while the nodes
// are healthy: no load-shedding poll of /_nodes/_local/stats (on by default
// in opensearch-go v4.8, every 5 s at first), which would also stop sending
// to the busy node the canary is there to measure.
func TestClientSendsNoBackgroundRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	paths := map[string]int{}
	node := func() string {
		return fakeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths[r.Method+" "+r.URL.Path]++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
		}))
	}
	a, b := node(), node()
	testProbe(t, a, func(c *Config) { c.Addresses = []string{a, b} })
	// The poller's first tick is 5 s after the client is made.
	time.Sleep(7 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	for path, n := range paths {
		t.Errorf("%d background request(s) %s", n, path)
	}
	if os.Getenv(nodeStatsEnv) != "-1s" {
		t.Errorf("%s=%q", nodeStatsEnv, os.Getenv(nodeStatsEnv))
	}
}
