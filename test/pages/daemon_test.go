//go:build integration

package pages

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/test/stack"
)

// instanceID is the daemon's global.instance_id: canary namespaces (queues,
// S3 prefixes, document ids) carry it.
const instanceID = "pages"

// Target roles. The ref target of each backend is in the demo config from
// the start and takes the server-level faults; the others are added later,
// one per target-level fault, so each fault has a target of its own.
const (
	roleRef   = "ref"
	roleLat   = "lat"
	roleCred  = "cred"
	roleSetup = "setup"
	roleData  = "data"
)

// Modes a target's config is rendered in.
const (
	modeOK        = ""
	modeBadSecret = "bad-secret"
	modeSetup     = "setup"
)

// target is one dbcanary target and the path to its server:
// daemon -> (gate) -> its own toxiproxy proxy -> server.
type target struct {
	name, backend, role string
	proxy               *toxiproxy.Proxy
	addr                string // what the daemon dials
	caFile              string // the CA an https endpoint's certificate is from
	mode                string
}

// daemon is the real dbcanary binary, its config and its targets.
type daemon struct {
	t       *testing.T
	dir     string
	cfgPath string
	addr    string
	url     string
	proc    *proc
	tc      *toxiproxy.Client

	demoGlobal  map[string]any
	demoTargets map[string]map[string]any // by backend
	demoOthers  []map[string]any          // targets of other backends (noop), kept as they are

	mu      sync.Mutex // targets, config file and reloads
	targets []*target
	proxies []*toxiproxy.Proxy // deleted after the daemon stopped, so its probes can remove what they wrote

	secrets map[string]string // name -> file
	osUser  string            // the OpenSearch basic-auth gate's user
}

// shortName is each backend's target name prefix.
var shortName = map[string]string{"cassandra": "cas", "opensearch": "os", "rabbitmq": "mq", "s3": "s3"}

func targetName(backend, role string) string { return shortName[backend] + "-" + role }

// newDaemon reads the demo config (deploy/local/dbcanary.yaml): every
// target the suite runs is a demo target (same ops, rates, timeouts and
// options), pointed at its own proxy with file-based secrets.
func newDaemon(t *testing.T, dir string) *daemon {
	t.Helper()
	demo := stack.DemoConfig(t)
	d := &daemon{t: t, dir: dir, cfgPath: filepath.Join(dir, "dbcanary.yaml"),
		tc:         toxiproxy.NewClient(envs["toxiproxy"].Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR")),
		demoGlobal: demo.Global, demoTargets: map[string]map[string]any{}, secrets: map[string]string{}, osUser: "pages"}
	// Registered before the daemon starts, so it runs after the daemon has
	// stopped (cleanups run last-in first-out): on SIGTERM the S3 probes
	// remove their run's objects through these proxies.
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.proxies {
			_ = p.Delete()
		}
	})
	for _, tg := range demo.Targets {
		b, _ := tg["backend"].(string)
		if _, probed := backendScripts[b]; probed && d.demoTargets[b] == nil {
			d.demoTargets[b] = tg
		} else if !probed {
			d.demoOthers = append(d.demoOthers, tg)
		}
	}
	for b := range backendScripts {
		if d.demoTargets[b] == nil {
			t.Fatalf("deploy/local/dbcanary.yaml has no %s target", b)
		}
	}
	secretsDir := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(secretsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bad", "os-pages", "mq-noconf", "cas-nogrant"} {
		p := filepath.Join(secretsDir, name)
		if err := os.WriteFile(p, []byte(randomSecret()), 0o600); err != nil {
			t.Fatal(err)
		}
		d.secrets[name] = p
	}
	return d
}

func randomSecret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "p" + hex.EncodeToString(b)
}

func (d *daemon) secret(name string) string {
	b, err := os.ReadFile(d.secrets[name])
	if err != nil {
		d.t.Fatal(err)
	}
	return string(b)
}

// upstream is the server address of a backend (host:port).
func upstream(t *testing.T, backend string) string {
	switch backend {
	case "cassandra":
		e := envs["cassandra"]
		return e.Get(t, "DBCANARY_TEST_CASSANDRA_HOST") + ":" + e.Get(t, "DBCANARY_TEST_CASSANDRA_PORT")
	case "opensearch":
		return strings.TrimPrefix(envs["opensearch"].Get(t, "DBCANARY_TEST_OPENSEARCH_URL"), "http://")
	case "rabbitmq":
		return "127.0.0.1:" + envs["rabbitmq"].Get(t, "DBCANARY_TEST_RABBITMQ_PORT")
	case "s3":
		return envs["minio"].Get(t, "DBCANARY_TEST_S3_ENDPOINT")
	}
	t.Fatalf("no upstream for %s", backend)
	return ""
}

// addTarget creates the target's proxy (and, for OpenSearch credentials, the
// basic-auth gate in front of it). The caller reloads.
func (d *daemon) addTarget(backend, role string) *target {
	t := d.t
	tg := &target{name: targetName(backend, role), backend: backend, role: role}
	pname := "dbcanary_pages_" + tg.name
	if old, err := d.tc.Proxy(pname); err == nil {
		_ = old.Delete()
	}
	p, err := d.tc.CreateProxy(pname, "127.0.0.1:0", upstream(t, backend))
	if err != nil {
		t.Fatalf("toxiproxy %s: %v", pname, err)
	}
	d.mu.Lock()
	d.proxies = append(d.proxies, p)
	d.mu.Unlock()
	tg.proxy, tg.addr = p, p.Listen
	if backend == "opensearch" && role == roleCred {
		tg.addr = d.authGate(p.Listen)
	}
	if backend == "s3" && role == roleCert {
		tg.addr, tg.caFile = d.tlsGate(p.Listen)
	}
	d.mu.Lock()
	d.targets = append(d.targets, tg)
	d.mu.Unlock()
	return tg
}

// authGate stands in for the OpenSearch security plugin, which the local
// server (the integ-test zip) does not have: a reverse proxy to the real
// node that answers 401 as the plugin does unless the request carries the
// canary user's password.
func (d *daemon) authGate(upstreamAddr string) string {
	u, _ := url.Parse("http://" + upstreamAddr)
	rp := httputil.NewSingleHostReverseProxy(u)
	want := d.secret("os-pages")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != d.osUser || subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="OpenSearch Security"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	d.t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func (d *daemon) target(name string) *target {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tg := range d.targets {
		if tg.name == name {
			return tg
		}
	}
	d.t.Fatalf("no target %s", name)
	return nil
}

// deepCopy copies a YAML-decoded value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

// render builds the daemon config from the targets' current modes.
// The caller holds d.mu.
func (d *daemon) render() ([]byte, error) {
	t := d.t
	global := deepCopy(d.demoGlobal).(map[string]any)
	global["instance_id"] = instanceID
	// The demo's ledger state lives beside the demo; this daemon's is its own.
	global["state_dir"] = filepath.Join(d.dir, "state")
	var targets []any
	for _, tg := range d.targets {
		m := deepCopy(d.demoTargets[tg.backend]).(map[string]any)
		m["name"] = tg.name
		sec, _ := m[tg.backend].(map[string]any)
		if sec == nil {
			sec = map[string]any{}
			m[tg.backend] = sec
		}
		host, portStr, _ := strings.Cut(tg.addr, ":")
		port, _ := strconv.Atoi(portStr)
		bad := tg.mode == modeBadSecret
		pick := func(good, badName string) string {
			if bad {
				return d.secrets[badName]
			}
			return good
		}
		switch tg.backend {
		case "rabbitmq":
			e := envs["rabbitmq"]
			delete(sec, "password_env")
			sec["url"] = "amqp://" + tg.addr + "/"
			sec["username"] = e.Get(t, "DBCANARY_TEST_RABBITMQ_USER")
			sec["password_file"] = pick(e.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"), "bad")
			if tg.mode == modeSetup { // a user without the configure permission
				sec["username"], sec["password_file"] = mqNoConfUser, d.secrets["mq-noconf"]
			}
		case "cassandra":
			e := envs["cassandra"]
			delete(sec, "password_env")
			// The driver also dials the node it discovers (rpc_address
			// 127.0.0.1) on this port: every connection goes through the proxy.
			sec["hosts"] = []any{host}
			sec["port"] = port
			sec["username"] = e.Get(t, "DBCANARY_TEST_CASSANDRA_USER")
			sec["password_file"] = pick(e.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"), "bad")
			sec["keyspace"] = cassandraKeyspace(tg)
			if tg.mode == modeSetup { // a role without any grant on the keyspace
				sec["username"], sec["password_file"] = casNoGrantRole, d.secrets["cas-nogrant"]
			}
		case "opensearch":
			sec["addresses"] = []any{"http://" + tg.addr}
			if tg.mode == modeSetup { // a new index the conflicting template applies to
				sec["index_prefix"] = osSetupPrefix(tg)
			}
			if tg.role == roleCred {
				sec["username"] = d.osUser
				sec["password_file"] = pick(d.secrets["os-pages"], "bad")
			}
		case "s3":
			e := envs["minio"]
			delete(sec, "access_key_id_env")
			delete(sec, "secret_access_key_env")
			sec["endpoint"] = "http://" + tg.addr
			if tg.caFile != "" {
				sec["endpoint"] = "https://" + tg.addr
				sec["tls"] = map[string]any{"ca_file": tg.caFile}
			}
			sec["bucket"] = s3Bucket
			sec["access_key_id_file"] = e.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE")
			sec["secret_access_key_file"] = pick(e.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE"), "bad")
			if tg.mode == modeSetup { // a missing bucket that may not be created
				sec["bucket"], sec["create_bucket"] = s3MissingBucket, false
			}
		}
		targets = append(targets, m)
	}
	for _, o := range d.demoOthers {
		targets = append(targets, deepCopy(o))
	}
	return yaml.Marshal(map[string]any{"global": global, "targets": targets})
}

const (
	s3Bucket        = "dbcanary-pages"
	s3MissingBucket = "dbcanary-pages-missing"
	mqNoConfUser    = "dbcanary-pages-noconf"
	casNoGrantRole  = "dbcanary_pages_nogrant"
)

func cassandraKeyspace(tg *target) string { return "dbcanary_pages_" + tg.role }

// start writes the config and starts the daemon.
func (d *daemon) start() {
	t := d.t
	d.mu.Lock()
	cfg, err := d.render()
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	d.addr = freeAddr(t)
	d.url = "http://" + d.addr
	d.proc = startProc(t, "dbcanary", filepath.Join(d.dir, "dbcanary.log"), daemonBin,
		"run", "--config.file="+d.cfgPath, "--web.listen-address="+d.addr)
	waitReady(t, d.proc, d.url+"/-/ready", 60*time.Second)
}

// setMode changes targets' modes and reloads the daemon (POST /-/reload).
func (d *daemon) setMode(ctx context.Context, mode string, tgs ...*target) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tg := range tgs {
		tg.mode = mode
	}
	return d.reloadLocked(ctx)
}

// reload re-renders the config (e.g. after addTarget) and reloads.
func (d *daemon) reload(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reloadLocked(ctx)
}

func (d *daemon) reloadLocked(ctx context.Context) error {
	cfg, err := d.render()
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.cfgPath, cfg, 0o600); err != nil {
		return err
	}
	status, body, err := request(ctx, http.MethodPost, d.url+"/-/reload", "")
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("reload: HTTP %d: %s", status, body)
	}
	return nil
}
