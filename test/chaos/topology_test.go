//go:build soakchaos

package chaos

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/test/stack"
)

// topology is the servers of the run, each from its test/stack script in
// the run's own stack directory (DBCANARY_STACK_DIR, set by make soak-chaos
// with the ports of its servers).
type topology struct {
	cas, mq, os, minio stack.Env
	// casProxies is cassandra-cluster.sh's toxiproxy: the driver reaches
	// node i only through proxy cassandra-node<i>.
	casProxies *toxiproxy.Client
	// s3 is MinIO behind a toxiproxy proxy of the run's.
	s3    *toxiproxy.Proxy
	osURL string // the first OpenSearch node, for the nemesis's admin calls
	nodes map[string]int
}

// scripts are the servers started, in this order of cost (the JVMs first,
// in parallel: each start is mostly waiting).
var scripts = []string{"cassandra-cluster", "opensearch-cluster", "rabbitmq-cluster", "minio", "toxiproxy"}

func startTopology(t *testing.T) *topology {
	t.Helper()
	envs := map[string]stack.Env{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(scripts))
	for _, s := range scripts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			env, err := stack.Start(s)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", s, err)
				return
			}
			mu.Lock()
			envs[s] = env
			mu.Unlock()
			logf("%s up in %s", s, time.Since(t0).Round(time.Second))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tp := &topology{cas: envs["cassandra-cluster"], mq: envs["rabbitmq-cluster"], os: envs["opensearch-cluster"], minio: envs["minio"], nodes: map[string]int{}}
	tp.casProxies = toxiproxy.NewClient(tp.cas.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	tc := toxiproxy.NewClient(envs["toxiproxy"].Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	if old, err := tc.Proxy("chaos-s3"); err == nil {
		_ = old.Delete()
	}
	p, err := tc.CreateProxy("chaos-s3", "127.0.0.1:0", tp.minio.Get(t, "DBCANARY_TEST_S3_ENDPOINT"))
	if err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	tp.s3 = p
	tp.osURL = strings.Split(tp.os.Get(t, "DBCANARY_TEST_OPENSEARCH_URLS"), ",")[0]
	for store, env := range map[string]stack.Env{"CASSANDRA": tp.cas, "RABBITMQ": tp.mq, "OPENSEARCH": tp.os} {
		var n int
		if _, err := fmt.Sscan(env.Get(t, "DBCANARY_TEST_"+store+"_NODES"), &n); err != nil {
			t.Fatalf("%s nodes: %v", store, err)
		}
		tp.nodes[store] = n
	}
	return tp
}

// pid is node i's process id (0 when its pid file is gone: stopped).
func (tp *topology) pid(t *testing.T, store string, i int) int {
	env := map[string]stack.Env{"CASSANDRA": tp.cas, "RABBITMQ": tp.mq, "OPENSEARCH": tp.os}[store]
	path := env.Get(t, fmt.Sprintf("DBCANARY_TEST_%s_NODE%d_PIDFILE", store, i))
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	return stack.PIDFile(t, path)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s chaos: %s\n", time.Now().UTC().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}
