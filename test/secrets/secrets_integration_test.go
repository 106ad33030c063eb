//go:build integration

package secrets

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

var (
	envs   = map[string]stack.Env{}
	binary string // the dbcanary binary built for this test
)

func TestMain(m *testing.M) {
	for _, b := range []string{"rabbitmq", "minio", "cassandra", "opensearch"} {
		envs[b] = stack.Must(b)
	}
	var remove func()
	binary, remove = stack.MustBuild("dbcanary-secrets-")
	stack.Exit(m.Run(), remove)
}

// markers are the secret values; each is unique so a leak names its source.
// The random part keeps them from matching anything else by chance.
var markers = func() map[string]string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := fmt.Sprintf("%x", b)
	return map[string]string{
		"rabbitmq-file":   "SECRETrmqfile" + id,
		"rabbitmq-env":    "SECRETrmqenv" + id,
		"cassandra-file":  "SECRETcassfile" + id,
		"cassandra-env":   "SECRETcassenv" + id,
		"opensearch-file": "SECRETosfile" + id,
		"opensearch-env":  "SECRETosenv" + id,
		"s3-key-file":     "SECRETs3keyfile" + id,
		"s3-secret-file":  "SECRETs3secretfile" + id,
		"s3-key-env":      "SECRETs3keyenv" + id,
		"s3-secret-env":   "SECRETs3secretenv" + id,
		"url-password":    "SECRETinurl" + id, // put where a secret does not belong
	}
}()

const envPrefix = "DBCANARY_SECRETS_TEST_"

// assertNoMarker fails if any marker appears in text.
func assertNoMarker(t *testing.T, where, text string) {
	t.Helper()
	for name, m := range markers {
		if i := strings.Index(text, m); i >= 0 {
			lo, hi := max(0, i-200), min(len(text), i+len(m)+100)
			t.Errorf("%s shows the %s secret: ...%s...", where, name, text[lo:hi])
		}
	}
}

// fixture is everything a config needs: secret files, a CA that signs
// nothing the servers present, a TLS server whose certificate it does not
// verify, and a closed port.
type fixture struct {
	dir        string
	files      map[string]string // marker name -> file holding it
	otherCA    string            // PEM of a CA no server uses
	tlsAddr    string            // a TLS listener with a certificate from yet another CA
	closedAddr string            // nothing listens here
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), files: map[string]string{}}
	for name, m := range markers {
		p := filepath.Join(f.dir, name)
		if err := os.WriteFile(p, []byte(m+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f.files[name] = p
	}
	caPEM, _, _ := selfSigned(t, "dbcanary secrets test CA")
	f.otherCA = filepath.Join(f.dir, "other-ca.pem")
	if err := os.WriteFile(f.otherCA, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _ := selfSigned(t, "127.0.0.1")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_ = c.(*tls.Conn).Handshake()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	f.tlsAddr = ln.Addr().String()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.closedAddr = closed.Addr().String()
	closed.Close()
	return f
}

// env is the child process's environment: the env-sourced secrets.
func (f *fixture) env() []string {
	out := os.Environ()
	for name, m := range markers {
		out = append(out, envPrefix+strings.NewReplacer("-", "_").Replace(strings.ToUpper(name))+"="+m)
	}
	return out
}

func envName(marker string) string {
	return envPrefix + strings.NewReplacer("-", "_").Replace(strings.ToUpper(marker))
}

// config has, per backend, a target with a wrong secret against the real
// server (one from a file, one from the environment), one against a closed
// port, one with a CA file that verifies nothing against the server's plain
// port, and one against a TLS server whose certificate the CA did not sign.
func (f *fixture) config(t *testing.T) string {
	t.Helper()
	mq, cass, osr, s3 := envs["rabbitmq"], envs["cassandra"], envs["opensearch"], envs["minio"]
	mqHostPort := strings.TrimSuffix(strings.TrimPrefix(mq.Get(t, "DBCANARY_TEST_RABBITMQ_URL"), "amqp://"), "/")
	cassHost, cassPort := cass.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"), cass.Get(t, "DBCANARY_TEST_CASSANDRA_PORT")
	osHostPort := strings.TrimPrefix(osr.Get(t, "DBCANARY_TEST_OPENSEARCH_URL"), "http://")
	s3HostPort := s3.Get(t, "DBCANARY_TEST_S3_ENDPOINT")
	closedHost, closedPort, _ := net.SplitHostPort(f.closedAddr)
	tlsHost, tlsPort, _ := net.SplitHostPort(f.tlsAddr)
	cassPlainHost, cassPlainPort := cassHost, cassPort
	var b strings.Builder
	b.WriteString("global: {instance_id: secrets-test, timeout: 3s, max_in_flight: 2}\ntargets:\n")
	add := func(name, backend, ops, section string) {
		fmt.Fprintf(&b, "  - name: %s\n    backend: %s\n    ops: %s\n    %s:\n%s\n", name, backend, ops, backend, indent(section, 6))
	}
	mqOps := "{publish: {rate: 1}, consume: {}}"
	mqSec := func(url, secret, tlsBlock string) string {
		return fmt.Sprintf("url: %s\nusername: %s\n%s\nconnect_timeout: 2s\n%s", url, mq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), secret, tlsBlock)
	}
	add("mq-wrong-file", "rabbitmq", mqOps, mqSec("amqp://"+mqHostPort+"/", "password_file: "+f.files["rabbitmq-file"], ""))
	add("mq-wrong-env", "rabbitmq", mqOps, mqSec("amqp://"+mqHostPort+"/", "password_env: "+envName("rabbitmq-env"), ""))
	add("mq-closed", "rabbitmq", mqOps, mqSec("amqp://"+f.closedAddr+"/", "password_file: "+f.files["rabbitmq-file"], ""))
	add("mq-tls-plain-port", "rabbitmq", mqOps, mqSec("amqps://"+mqHostPort+"/", "password_env: "+envName("rabbitmq-env"), "tls: {ca_file: "+f.otherCA+"}"))
	add("mq-tls-unknown-ca", "rabbitmq", mqOps, mqSec("amqps://"+f.tlsAddr+"/", "password_file: "+f.files["rabbitmq-file"], "tls: {ca_file: "+f.otherCA+"}"))

	cassOps := "{insert: {rate: 1}, read: {rate: 1}}"
	cassSec := func(host, port, secret, tlsBlock string) string {
		return fmt.Sprintf("hosts: [%q]\nport: %s\nusername: %s\n%s\nconnect_timeout: 2s\nrequest_timeout: 2s\nkeyspace: dbcanary_secrets\nreplication: {class: SimpleStrategy, replication_factor: 1}\n%s",
			host, port, cass.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), secret, tlsBlock)
	}
	add("cass-wrong-file", "cassandra", cassOps, cassSec(cassHost, cassPort, "password_file: "+f.files["cassandra-file"], ""))
	add("cass-wrong-env", "cassandra", cassOps, cassSec(cassHost, cassPort, "password_env: "+envName("cassandra-env"), ""))
	add("cass-closed", "cassandra", cassOps, cassSec(closedHost, closedPort, "password_file: "+f.files["cassandra-file"], ""))
	add("cass-tls-plain-port", "cassandra", cassOps, cassSec(cassPlainHost, cassPlainPort, "password_env: "+envName("cassandra-env"), "tls: {ca_file: "+f.otherCA+"}"))
	add("cass-tls-unknown-ca", "cassandra", cassOps, cassSec(tlsHost, tlsPort, "password_file: "+f.files["cassandra-file"], "tls: {ca_file: "+f.otherCA+"}"))

	osOps := "{index: {rate: 1}, get: {rate: 1}, search_default: {rate: 1}}"
	osSec := func(addr, secret, tlsBlock string) string {
		return fmt.Sprintf("addresses: [%q]\nusername: admin\n%s\nconnect_timeout: 2s\nrequest_timeout: 2s\nmax_retries: 0\nreplicas: 0\n%s", addr, secret, tlsBlock)
	}
	add("os-wrong-file", "opensearch", osOps, osSec("http://"+osHostPort, "password_file: "+f.files["opensearch-file"], ""))
	add("os-wrong-env", "opensearch", osOps, osSec("http://"+osHostPort, "password_env: "+envName("opensearch-env"), ""))
	add("os-closed", "opensearch", osOps, osSec("http://"+f.closedAddr, "password_file: "+f.files["opensearch-file"], ""))
	add("os-tls-plain-port", "opensearch", osOps, osSec("https://"+osHostPort, "password_env: "+envName("opensearch-env"), "tls: {ca_file: "+f.otherCA+"}"))
	add("os-tls-unknown-ca", "opensearch", osOps, osSec("https://"+f.tlsAddr, "password_file: "+f.files["opensearch-file"], "tls: {ca_file: "+f.otherCA+"}"))

	s3Ops := "{put_4KiB: {rate: 1}, get_4KiB: {rate: 1}, list: {rate: 1}}"
	s3Sec := func(endpoint, creds, tlsBlock string) string {
		return fmt.Sprintf("endpoint: %q\naddressing: path\nbucket: dbcanary-secrets\nsizes: [4KiB]\nconnect_timeout: 2s\n%s\n%s", endpoint, creds, tlsBlock)
	}
	fileCreds := "access_key_id_file: " + f.files["s3-key-file"] + "\nsecret_access_key_file: " + f.files["s3-secret-file"]
	envCreds := "access_key_id_env: " + envName("s3-key-env") + "\nsecret_access_key_env: " + envName("s3-secret-env")
	add("s3-wrong-file", "s3", s3Ops, s3Sec("http://"+s3HostPort, fileCreds, ""))
	add("s3-wrong-env", "s3", s3Ops, s3Sec("http://"+s3HostPort, envCreds, ""))
	add("s3-closed", "s3", s3Ops, s3Sec("http://"+f.closedAddr, fileCreds, ""))
	add("s3-tls-plain-port", "s3", s3Ops, s3Sec("https://"+s3HostPort, envCreds, "tls: {ca_file: "+f.otherCA+"}"))
	add("s3-tls-unknown-ca", "s3", s3Ops, s3Sec("https://"+f.tlsAddr, fileCreds, "tls: {ca_file: "+f.otherCA+"}"))
	return b.String()
}

// brokenConfig is rejected: secrets in URLs (where they do not belong),
// unparsable URLs around them, and plain mistakes next to them.
func (f *fixture) brokenConfig() string {
	m := markers["url-password"]
	return fmt.Sprintf(`global: {instance_id: secrets-test}
targets:
  - name: mq-url-password
    backend: rabbitmq
    rabbitmq: {url: "amqp://dbcanary:%[1]s@127.0.0.1:5672/", password_file: %[2]s}
  - name: mq-url-unparsable
    backend: rabbitmq
    rabbitmq: {url: "amqp://dbcanary:%[1]s@[::1", password_file: %[2]s}
  - name: os-url-password
    backend: opensearch
    opensearch: {addresses: ["http://admin:%[1]s@127.0.0.1:9200", "http://admin:%[1]s@[::1"]}
  - name: s3-url-password
    backend: s3
    s3: {endpoint: "http://AKIA:%[1]s@127.0.0.1:9000"}
  - name: s3-url-unparsable
    backend: s3
    s3: {endpoint: "http://AKIA:%[1]s@[::1"}
  - name: cass-host-password
    backend: cassandra
    cassandra: {hosts: ["cassandra:%[1]s@127.0.0.1", "cassandra:%[1]s@[::1"], username: cassandra, password_file: %[3]s}
  - name: cass-typo
    backend: cassandra
    cassandra: {hosts: [127.0.0.1], username: cassandra, password_file: %[3]s, keyspace_typo: x}
`, m, f.files["rabbitmq-file"], f.files["cassandra-file"])
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// dbcanary runs the binary to completion (bounded) and returns its output.
func dbcanary(t *testing.T, f *fixture, timeout time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = f.env()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("dbcanary %v did not finish within %s", args, timeout)
	}
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCheckDumpAndOnceShowNoSecret: check-config, dump-config and once (with
// debug logging, logfmt and JSON) against every failing target.
func TestCheckDumpAndOnceShowNoSecret(t *testing.T) {
	f := newFixture(t)
	cfg := filepath.Join(f.dir, "dbcanary.yaml")
	writeFile(t, cfg, f.config(t))

	code, out, errOut := dbcanary(t, f, 30*time.Second, "check-config", "--config.file", cfg)
	if code != 0 {
		t.Fatalf("check-config: exit %d\n%s%s", code, out, errOut)
	}
	assertNoMarker(t, "check-config", out+errOut)

	code, out, errOut = dbcanary(t, f, 30*time.Second, "dump-config", "--config.file", cfg)
	if code != 0 || !strings.Contains(out, "password_file: "+f.files["rabbitmq-file"]) || !strings.Contains(out, "secret_access_key_env: "+envName("s3-secret-env")) {
		t.Errorf("dump-config: exit %d, or the secret references are missing:\n%s%s", code, out, errOut)
	}
	assertNoMarker(t, "dump-config", out+errOut)

	for _, format := range []string{"logfmt", "json"} {
		code, out, errOut = dbcanary(t, f, 3*time.Minute, "once", "--config.file", cfg, "--log.level", "debug", "--log.format", format)
		if code != 1 {
			t.Errorf("once: exit %d, want 1 (every target fails)", code)
		}
		t.Logf("once (%s):\n%s", format, out)
		assertNoMarker(t, "once --log.format "+format, out+errOut)
		// Every target failed, each with a cause from the fixed set; except
		// the wrong OpenSearch passwords: the stack's OpenSearch runs without
		// the security plugin and ignores credentials (the password is still
		// sent, as a header, on every request: that path is what is checked).
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) >= 4 && strings.HasPrefix(fields[0], "os-wrong-") {
				continue
			}
			if len(fields) < 6 || fields[3] != "error" {
				t.Errorf("once: a row did not fail: %s", line)
			}
		}
	}

	broken := filepath.Join(f.dir, "broken.yaml")
	writeFile(t, broken, f.brokenConfig())
	code, out, errOut = dbcanary(t, f, 30*time.Second, "check-config", "--config.file", broken)
	if code != 3 || !strings.Contains(errOut, "must not contain") || !strings.Contains(errOut, "targets[5].cassandra.hosts[0]") {
		t.Errorf("check-config of the broken config: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("broken config rejected with:\n%s", errOut)
	assertNoMarker(t, "check-config of a config with secrets in URLs", out+errOut)
}

// TestDaemonShowsNoSecret runs the daemon with debug logging against every
// failing target, scrapes /metrics, rejects a reload of a config with
// secrets in URLs (HTTP and SIGHUP), and checks every byte it wrote.
func TestDaemonShowsNoSecret(t *testing.T) {
	f := newFixture(t)
	cfg := filepath.Join(f.dir, "dbcanary.yaml")
	writeFile(t, cfg, f.config(t))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--config.file", cfg, "--web.listen-address", addr,
		"--log.level", "debug", "--shutdown.grace-period", "2s")
	cmd.Env = f.env()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon exited with %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("daemon did not stop within 30 s of SIGTERM")
		}
	}
	defer stop()

	base := "http://" + addr
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not ready within 30 s:\n%s", errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Let every target fail for a while: connects, retries, backoffs.
	time.Sleep(20 * time.Second)
	metrics := get("/metrics")
	for _, name := range []string{"mq-wrong-file", "cass-wrong-env", "os-tls-unknown-ca", "s3-wrong-env"} {
		if !strings.Contains(metrics, `dbcanary_op_failures_total{`) || !strings.Contains(metrics, `target="`+name+`"`) {
			t.Errorf("/metrics has no series of %s", name)
		}
	}
	assertNoMarker(t, "/metrics", metrics)
	assertNoMarker(t, "landing page", get("/"))

	// A reload with secrets in URLs is rejected over HTTP and on SIGHUP.
	writeFile(t, cfg, f.brokenConfig())
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "must not contain") {
		t.Errorf("reload of the broken config: %d %s", resp.StatusCode, body)
	}
	assertNoMarker(t, "/-/reload response", string(body))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	metrics = get("/metrics")
	if !strings.Contains(metrics, "dbcanary_config_last_reload_successful 0") {
		t.Error("dbcanary_config_last_reload_successful is not 0 after the rejected reloads")
	}
	assertNoMarker(t, "/metrics after the rejected reloads", metrics)

	stop()
	logs := errOut.String()
	if !strings.Contains(logs, "level=DEBUG") || !strings.Contains(logs, "config reload failed") {
		t.Errorf("the debug log lacks debug lines or the reload failure (%d bytes)", len(logs))
	}
	t.Logf("daemon wrote %d bytes of logs, %d lines", len(logs), strings.Count(logs, "\n"))
	assertNoMarker(t, "daemon stdout", out.String())
	assertNoMarker(t, "daemon log (stderr)", logs)
}

// selfSigned returns a self-signed CA certificate and key as PEM.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), cert
}
