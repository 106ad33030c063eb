//go:build soakchaos

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	// swift is OpenStack Swift's s3api, a second S3 implementation;
	// lossy a single RabbitMQ broker whose ledger is configured to lose
	// (transient messages in a classic queue).
	swift, lossy     *private
	swiftEnv, mqLoss stack.Env
}

// private is a server of the run's own: test/stack/<script>.sh in a folder
// of the run's stack directory, on ports of its own (env), so that no other
// suite's server of the same script is touched.
type private struct {
	script, dir string
	env         []string
}

// lossyNode is the lossy broker's Erlang node name.
const lossyNode = "dbcanary-lossy@localhost"

// privates are the run's own servers beside the scripts' defaults.
func privates() (swift, lossy *private) {
	dir := stack.DataDir()
	return &private{"swift", filepath.Join(dir, "swift-chaos"), []string{"DBCANARY_SWIFT_PORT=18280",
			"DBCANARY_SWIFT_OBJECT_PORT=18210", "DBCANARY_SWIFT_CONTAINER_PORT=18211", "DBCANARY_SWIFT_ACCOUNT_PORT=18212",
			"DBCANARY_SWIFT_MEMCACHED_PORT=18219", "DBCANARY_SWIFT_TLS_PORT=18243", "DBCANARY_SWIFT_RECHECK_CONTAINER=3600"}},
		&private{"rabbitmq", filepath.Join(dir, "rabbitmq-lossy"), []string{"DBCANARY_RABBITMQ_NODENAME=" + lossyNode,
			"DBCANARY_RABBITMQ_PORT=15831", "DBCANARY_RABBITMQ_DIST_PORT=25831"}}
}

// run runs one of the script's verbs.
func (p *private) run(action string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(stack.Dir(), p.script+".sh"), action)
	cmd.Env = append(append(os.Environ(), "DBCANARY_STACK_DIR="+p.dir), p.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s.sh %s (%s): %w: %s", p.script, action, p.dir, err, out)
	}
	return string(out), nil
}

// start starts the server (idempotent) and returns its env; it is stopped
// when the test ends unless DBCANARY_STACK_KEEP=1, as the stack's servers.
func (p *private) start(t *testing.T) (stack.Env, error) {
	if _, err := p.run("start"); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if os.Getenv("DBCANARY_STACK_KEEP") != "1" {
			if _, err := p.run("stop"); err != nil {
				t.Log(err)
			}
		}
	})
	out, err := p.run("env")
	env := stack.Env{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env, err
}

// scripts are the servers started, in this order of cost (the JVMs first,
// in parallel: each start is mostly waiting).
var scripts = []string{"cassandra-cluster", "opensearch-cluster", "rabbitmq-cluster", "minio", "toxiproxy"}

func startTopology(t *testing.T) *topology {
	t.Helper()
	envs := map[string]stack.Env{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(scripts)+2)
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
	swift, lossy := privates()
	var swiftEnv, lossyEnv stack.Env
	for _, p := range []struct {
		srv *private
		env *stack.Env
	}{{swift, &swiftEnv}, {lossy, &lossyEnv}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			env, err := p.srv.start(t)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			*p.env = env
			mu.Unlock()
			logf("%s (%s) up in %s", p.srv.script, filepath.Base(p.srv.dir), time.Since(t0).Round(time.Second))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tp := &topology{cas: envs["cassandra-cluster"], mq: envs["rabbitmq-cluster"], os: envs["opensearch-cluster"], minio: envs["minio"], nodes: map[string]int{},
		swift: swift, lossy: lossy, swiftEnv: swiftEnv, mqLoss: lossyEnv}
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
