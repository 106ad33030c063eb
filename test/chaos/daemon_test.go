//go:build soakchaos

package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/test/stack"
)

// Target names: each owns the pages of its store's faults.
const (
	targetCas = "cas"
	targetMQ  = "mq"
	targetOS  = "os"
	targetS3  = "s3"
	// targetSwift is OpenStack Swift's s3api: the second S3 implementation.
	targetSwift = "swift"
	// targetMQLossy is a single RabbitMQ broker whose ledger publishes
	// transient messages into a classic queue: configured to lose them on a
	// broker restart, as docs/ledger.md shows.
	targetMQLossy = "mq-lossy"
	instanceID    = "chaos"
	s3Bucket      = "dbcanary-chaos"
	// casKeyspace is the Cassandra target's keyspace (RF 3).
	casKeyspace = "dbcanary_chaos"
)

// daemon is the dbcanary under test: always on one address, so that a
// restarted process is the same Prometheus target.
type daemon struct {
	t        *testing.T
	dir      string
	cfgPath  string
	stateDir string
	addr     string
	tp       *topology
	badS3    bool // the S3 target's secret key file is a wrong one
	mu       sync.Mutex
	cur      *stack.Daemon
	starts   int
}

func newDaemon(t *testing.T, dir, stateDir string, tp *topology) *daemon {
	d := &daemon{t: t, dir: dir, cfgPath: filepath.Join(dir, "dbcanary.yaml"), stateDir: stateDir, tp: tp,
		addr: fmt.Sprintf("127.0.0.1:%d", stack.FreePort(t))}
	if err := os.WriteFile(filepath.Join(dir, "wrong-secret"), []byte("not-the-secret-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.cfgPath, d.render(), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

// render is the demo config (deploy/local/dbcanary.yaml: ops, rates,
// timeouts, its noop target) pointed at the run's servers, as the reference
// deployment runs them: RF 3 at LOCAL_QUORUM, a quorum queue on every
// RabbitMQ node's url, OpenSearch indices with one replica.
func (d *daemon) render() []byte {
	t := d.t
	demo := stack.DemoConfig(t)
	demo.Global["instance_id"], demo.Global["state_dir"] = instanceID, d.stateDir
	var targets []any
	for _, tg := range demo.Targets {
		b, _ := tg["backend"].(string)
		var sec map[string]any
		switch b {
		case "cassandra":
			tg["name"], sec = targetCas, d.cassandra()
		case "rabbitmq":
			tg["name"], sec = targetMQ, d.rabbitmq()
		case "opensearch":
			tg["name"], sec = targetOS, d.opensearch()
		case "s3":
			tg["name"], sec = targetS3, d.s3(tg[b])
		default:
			targets = append(targets, tg)
			continue
		}
		tg[b] = sec
		targets = append(targets, tg)
	}
	targets = append(targets, d.extraTargets()...)
	out, err := yaml.Marshal(map[string]any{"global": demo.Global, "targets": targets})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (d *daemon) cassandra() map[string]any {
	e, dc := d.tp.cas, d.tp.cas.Get(d.t, "DBCANARY_TEST_CASSANDRA_DC")
	port, err := strconv.Atoi(e.Get(d.t, "DBCANARY_TEST_CASSANDRA_PORT"))
	if err != nil {
		d.t.Fatalf("cassandra port: %v", err)
	}
	return map[string]any{"hosts": strings.Split(e.Get(d.t, "DBCANARY_TEST_CASSANDRA_HOSTS"), ","),
		"port": port, "local_dc": dc, "keyspace": casKeyspace, "ttl": casTTL.String(),
		"replication": map[string]any{"class": "NetworkTopologyStrategy", "datacenters": map[string]any{dc: 3}}}
}

// extraTargets are the demo's S3 and RabbitMQ targets again, on Swift and
// on the lossy broker.
func (d *daemon) extraTargets() []any {
	var out []any
	for _, tg := range stack.DemoConfig(d.t).Targets { // a fresh copy: render edits its own
		switch tg["backend"] {
		case "s3":
			e := d.tp.swiftEnv
			tg["name"], tg["s3"] = targetSwift, map[string]any{"endpoint": "http://" + e.Get(d.t, "DBCANARY_TEST_S3_ENDPOINT"),
				"region": e.Get(d.t, "DBCANARY_TEST_S3_REGION"), "addressing": "path", "bucket": s3Bucket, "lifecycle_expiry": false,
				"access_key_id_file": e.Get(d.t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), "secret_access_key_file": e.Get(d.t, "DBCANARY_TEST_S3_SECRET_KEY_FILE")}
			out = append(out, tg)
		case "rabbitmq":
			e := d.tp.mqLoss
			tg["name"], tg["rabbitmq"] = targetMQLossy, map[string]any{"url": e.Get(d.t, "DBCANARY_TEST_RABBITMQ_URL"), "queue_type": "classic",
				"username": e.Get(d.t, "DBCANARY_TEST_RABBITMQ_USER"), "password_file": e.Get(d.t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"),
				"ledger": map[string]any{"queue_type": "classic", "transient": true, "ages": []string{lossyLedgerAge.String()}}}
			out = append(out, tg)
		}
	}
	return out
}

func (d *daemon) rabbitmq() map[string]any {
	e := d.tp.mq
	return map[string]any{"urls": strings.Split(e.Get(d.t, "DBCANARY_TEST_RABBITMQ_URLS"), ","), "queue_type": "quorum",
		"username": e.Get(d.t, "DBCANARY_TEST_RABBITMQ_USER"), "password_file": e.Get(d.t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE")}
}

func (d *daemon) opensearch() map[string]any {
	return map[string]any{"addresses": strings.Split(d.tp.os.Get(d.t, "DBCANARY_TEST_OPENSEARCH_URLS"), ","),
		"replicas": min(1, d.tp.nodes["OPENSEARCH"]-1)}
}

func (d *daemon) s3(demo any) map[string]any {
	e := d.tp.minio
	sec := map[string]any{"endpoint": "http://" + d.tp.s3.Listen, "bucket": s3Bucket,
		"access_key_id_file": e.Get(d.t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), "secret_access_key_file": e.Get(d.t, "DBCANARY_TEST_S3_SECRET_KEY_FILE")}
	if m, ok := demo.(map[string]any); ok {
		sec["region"] = m["region"]
	}
	if d.badS3 {
		sec["secret_access_key_file"] = filepath.Join(d.dir, "wrong-secret")
	}
	return sec
}

// start starts the daemon on its address and waits until it is ready.
func (d *daemon) start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.starts++
	logPath := filepath.Join(d.dir, fmt.Sprintf("dbcanary-%d.log", d.starts))
	d.cur = stack.StartDaemon(d.t, binary, d.cfgPath, stack.DaemonOptions{Addr: d.addr, Args: []string{"--shutdown.grace-period", "10s"},
		OnStop: func(log []byte) { _ = os.WriteFile(logPath, log, 0o644) }})
}

func (d *daemon) pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur.Cmd.Process.Pid
}

// kill9 kills the daemon: no drain, no final ledger write.
func (d *daemon) kill9() { stack.Kill9(d.t, d.pid(), "dbcanary") }

// stopInReload asks for a reload and sends SIGTERM while it runs, then
// waits until the process is gone.
func (d *daemon) stopInReload(ctx context.Context) string {
	pid := d.pid()
	done := make(chan string, 1)
	go func() {
		status, _, err := d.post(ctx, "/-/reload")
		done <- fmt.Sprintf("reload answered %d (%v)", status, err)
	}()
	time.Sleep(5 * time.Millisecond) // the reload's request is on its way
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(60 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	return <-done
}

// reload writes the config (broken: a config the daemon must refuse) and
// asks the daemon to load it.
func (d *daemon) reload(ctx context.Context, broken bool) (int, string, error) {
	cfg := d.render()
	if broken {
		cfg = append(cfg, []byte("not_a_key: [unterminated\n")...)
	}
	if err := os.WriteFile(d.cfgPath, cfg, 0o600); err != nil {
		return 0, "", err
	}
	return d.post(ctx, "/-/reload")
}

func (d *daemon) post(ctx context.Context, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}
