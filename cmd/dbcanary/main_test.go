package main

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
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = execute(args, &o, &e)
	return code, o.String(), e.String()
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "dbcanary.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const cliNoopConfig = `
global: {instance_id: cli-test}
targets:
  - {name: alpha, backend: noop, ops: {noop: {rate: 20}}}
`

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := writeConfig(t, dir, cliNoopConfig)
	code, out, _ := run(t, "check-config", "--config.file", good)
	if code != 0 || !strings.Contains(out, "OK: 1 target(s), 1 op(s)") {
		t.Errorf("good config: code %d, out %q", code, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("targets:\n  - name: x\n    backend: nope\n  - name: Y\n    backend: noop\n"), 0o600)
	code, _, errOut := run(t, "check-config", "--config.file", bad)
	if code != 3 {
		t.Errorf("bad config: exit %d, want 3", code)
	}
	for _, want := range []string{"2 error(s):", `targets[0].backend: unknown backend "nope"`, `targets[1].name: "Y" must be`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	code, _, errOut = run(t, "check-config", "--config.file", filepath.Join(dir, "missing.yaml"))
	if code != 3 || !strings.Contains(errOut, "cannot read config") {
		t.Errorf("missing file: %d %q", code, errOut)
	}
}

func TestDumpConfigAndVersion(t *testing.T) {
	p := writeConfig(t, t.TempDir(), cliNoopConfig)
	code, out, _ := run(t, "dump-config", "--config.file", p)
	if code != 0 || !strings.Contains(out, "max_in_flight: 16") || !strings.Contains(out, "failure_cause: server") {
		t.Errorf("dump-config: %d\n%s", code, out)
	}
	code, out, _ = run(t, "version")
	if code != 0 || !strings.Contains(out, "dbcanary, version") {
		t.Errorf("version: %d %q", code, out)
	}
	code, _, errOut := run(t, "run", "--log.format", "xml", "--config.file", p)
	if code != 2 || !strings.Contains(errOut, "--log.format") {
		t.Errorf("bad flag: %d %q", code, errOut)
	}
}

func TestOnceNoop(t *testing.T) {
	p := writeConfig(t, t.TempDir(), cliNoopConfig+"  - {name: broken, backend: noop, noop: {failure_ratio: 1, failure_cause: refused}}\n")
	code, out, errOut := run(t, "once", "--config.file", p)
	if code != 1 {
		t.Errorf("exit %d, want 1 (one target fails)", code)
	}
	if !strings.Contains(out, "alpha") || !strings.Contains(out, "refused") || !strings.Contains(errOut, "1 of 2 op(s) failed") {
		t.Errorf("once output:\n%s\n%s", out, errOut)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startDaemon runs `dbcanary run` in-process and returns its base URL.
func startDaemon(t *testing.T, client *http.Client, scheme string, args ...string) (base string, stop func()) {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	root, _ := newRootCmd(io.Discard, io.Discard)
	root.SetArgs(append([]string{"run", "--web.listen-address", addr, "--shutdown.grace-period", "1s"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	base = scheme + "://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(base + "/-/healthy")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("daemon did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return base, func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon exited with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10 s")
		}
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRunReloadByHTTPAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, cliNoopConfig)
	c := http.DefaultClient
	base, stop := startDaemon(t, c, "http", "--config.file", cfgPath)
	defer stop()

	waitMetric := func(substr string, present bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, body := get(t, c, base+"/metrics")
			if strings.Contains(body, substr) == present {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %q present=%v in /metrics", substr, present)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitMetric(`dbcanary_op_latency_seconds_count{backend="noop",op="noop",result="ok",target="alpha"}`, true)
	if code, body := get(t, c, base+"/-/ready"); code != 200 {
		t.Errorf("ready: %d %s", code, body)
	}
	if code, body := get(t, c, base+"/"); code != 200 || !strings.Contains(body, "dbcanary") {
		t.Errorf("landing page: %d", code)
	}
	if code, _ := get(t, c, base+"/-/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload = %d, want 405", code)
	}

	// A good new config replaces alpha with beta.
	writeConfig(t, dir, strings.ReplaceAll(cliNoopConfig, "alpha", "beta"))
	resp, err := c.Post(base+"/-/reload", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reload: %v %v", err, resp)
	}
	resp.Body.Close()
	waitMetric(`target="beta"`, true)
	waitMetric(`target="alpha"`, false)
	waitMetric("dbcanary_config_last_reload_successful 1", true)

	// A bad config is rejected; beta keeps running.
	writeConfig(t, dir, "targets:\n  - name: gamma\n    backend: noop\n    bogus: 1\n")
	resp, err = c.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), `targets[0].bogus: line 4: unknown field "bogus"`) {
		t.Errorf("bad reload: %d %s", resp.StatusCode, body)
	}
	waitMetric("dbcanary_config_last_reload_successful 0", true)
	waitMetric(`target="beta"`, true)

	// SIGHUP reloads too (the daemon's signal handler catches it in-process).
	writeConfig(t, dir, strings.ReplaceAll(cliNoopConfig, "alpha", "delta"))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitMetric(`target="delta"`, true)
	waitMetric("dbcanary_config_last_reload_successful 1", true)
}

// TestWebConfigTLSAndBasicAuth: --web.config.file enables TLS and basic auth
// through exporter-toolkit: no credentials 401, right credentials 200.
func TestWebConfigTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	webCfg := filepath.Join(dir, "web.yml")
	// bcrypt("canary-test-pass"), cost 10.
	os.WriteFile(webCfg, []byte(fmt.Sprintf(`tls_server_config:
  cert_file: %s
  key_file: %s
basic_auth_users:
  prometheus: $2a$10$RjJf7QN8YOaz6u4Hf/1l1uJGAr39YLKLhO0m7Z5FRY5T2MEd3FT7O
`, certFile, keyFile)), 0o600)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base, stop := startDaemon(t, c, "https", "--config.file", writeConfig(t, dir, cliNoopConfig), "--web.config.file", webCfg)
	defer stop()
	if code, _ := get(t, c, base+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.SetBasicAuth("prometheus", "canary-test-pass")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("right credentials over TLS: %d, want 200", resp.StatusCode)
	}
	req.SetBasicAuth("prometheus", "wrong")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", resp.StatusCode)
	}
	// Plain HTTP to a TLS port gets a 400 from Go's server, never the metrics.
	if resp, err := http.Get("http://" + strings.TrimPrefix(base, "https://") + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("metrics served over plain HTTP")
		}
	}
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestCheckConfigLedgerWarnings: rates that make the durability ledger drop
// entries unchecked or never read them back are valid, and warned about.
func TestCheckConfigLedgerWarnings(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("x\n"), 0o600)
	cfg := writeConfig(t, dir, `targets:
  - name: s3-fast
    backend: s3
    ops: {ledger_write: {rate: 1}, ledger_check: {rate: 0.1}}
    s3: {endpoint: http://127.0.0.1:9, bucket: canary, access_key_id_file: `+pw+`, secret_access_key_file: `+pw+`}
  - name: s3-nocheck
    backend: s3
    ops: {ledger_write: {rate: 0.05}}
    s3: {endpoint: http://127.0.0.1:9, bucket: canary, access_key_id_file: `+pw+`, secret_access_key_file: `+pw+`}
  - name: s3-default
    backend: s3
    s3: {endpoint: http://127.0.0.1:9, bucket: canary, access_key_id_file: `+pw+`, secret_access_key_file: `+pw+`}
`)
	code, out, errOut := run(t, "check-config", "--config.file", cfg)
	if code != 0 || !strings.Contains(out, "OK: 3 target(s)") {
		t.Fatalf("check-config: %d %q %q", code, out, errOut)
	}
	for _, want := range []string{
		"warning: targets[0] (s3-fast): durability ledger: ledger_write at 1/s holds about 3600 entries until their last check at 1h, more than ledger.max_entries (1000)",
		"warning: targets[0] (s3-fast): durability ledger: 3 checks/s fall due (ledger_write at 1/s x 3 ages), more than ledger_check at 0.1/s reads (4 per run)",
		"warning: targets[1] (s3-nocheck): durability ledger: ledger_write is on and ledger_check is off",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "s3-default") {
		t.Errorf("the default ledger rates are warned about:\n%s", errOut)
	}
}
