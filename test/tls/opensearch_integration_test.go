//go:build integration

package tls

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
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
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/dbcanary/dbcanary/test/pki"
	"github.com/dbcanary/dbcanary/test/stack"
)

// openSearchSecurityVersion is the server version the security tests run: the
// plugin (org.opensearch.plugin:opensearch-security:<version>.0) must match the
// server exactly; 2.19.3.0 is on Maven Central.
const openSearchSecurityVersion = "2.19.3"

// openSearchNodePEM writes the node's certificate (for 127.0.0.1 and
// localhost, usable for HTTP and transport TLS) and its key as the security
// plugin reads it: unencrypted PKCS#8.
func openSearchNodePEM(t *testing.T, c *ca, certPath, keyPath string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "node.dbcanary.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pki.WriteFile(t, certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	pki.WriteFile(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// canaryIndexActions is the index part of the least-privilege role of
// docs/opensearch.md ("Permissions of a least-privilege canary user"); the
// cluster part is in openSearchSecurityFiles. Without cluster:monitor/state,
// cluster:monitor/health or indices:monitor/settings/get this test sees a 403
// in the log (the retention listing), without indices:data/write/delete a
// one-shot run's documents left behind. indices:admin/delete (retention) is
// not exercised: no index is old enough here.
var canaryIndexActions = []string{
	"indices:admin/create", "indices:admin/aliases", "indices:admin/delete", "indices:monitor/stats", "indices:monitor/settings/get",
	"indices:data/write/index", "indices:data/write/bulk*", "indices:data/write/delete",
	"indices:data/read/get", "indices:data/read/search",
	"indices:admin/mappings/get",
}

// openSearchSecurityFiles writes the security plugin's users, roles and role
// mappings: "dbcanary" with the least-privilege canary role, and
// "dbcanary_nocreate" with the same role minus indices:admin/create.
func openSearchSecurityFiles(t *testing.T, dir string, passwords map[string]string) {
	t.Helper()
	users := "_meta: {type: internalusers, config_version: 2}\n"
	for user, pass := range passwords {
		hash, err := bcrypt.GenerateFromPassword([]byte(pass), 10)
		if err != nil {
			t.Fatal(err)
		}
		users += fmt.Sprintf("%s: {hash: %q, reserved: false, description: dbcanary test user}\n", user, hash)
	}
	pki.WriteFile(t, filepath.Join(dir, "internal_users.yml"), []byte(users))
	role := func(actions []string) string {
		return fmt.Sprintf("  cluster_permissions: [cluster_composite_ops, \"cluster:monitor/state\", \"cluster:monitor/health\", \"cluster:monitor/main\"]\n  index_permissions:\n    - index_patterns: [\"dbcanary-*\"]\n      allowed_actions: [%s]\n",
			`"`+strings.Join(actions, `", "`)+`"`)
	}
	var nocreate []string
	for _, a := range canaryIndexActions {
		if a != "indices:admin/create" {
			nocreate = append(nocreate, a)
		}
	}
	pki.WriteFile(t, filepath.Join(dir, "roles.yml"), []byte("_meta: {type: roles, config_version: 2}\n"+
		"dbcanary_canary:\n"+role(canaryIndexActions)+"dbcanary_nocreate:\n"+role(nocreate)))
	pki.WriteFile(t, filepath.Join(dir, "roles_mapping.yml"), []byte("_meta: {type: rolesmapping, config_version: 2}\n"+
		"dbcanary_canary: {users: [dbcanary]}\ndbcanary_nocreate: {users: [dbcanary_nocreate]}\n"))
}

// TestOpenSearchSecurityPlugin: a private OpenSearch node with the security
// plugin, TLS on HTTP and the transport, and internal users. Every op succeeds
// for the least-privilege user over https, the expiry gauge is the node
// certificate's not-after; a wrong password fails with cause auth, a user
// without indices:admin/create with cause setup, a client trusting another CA
// or expecting another host name with cause tls.
func TestOpenSearchSecurityPlugin(t *testing.T) {
	authority, other := newCA(t, "dbcanary test CA"), newCA(t, "some other CA")
	dir, err := os.MkdirTemp("", "dbcanary-tls-os-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the node runs as an unprivileged user
		t.Fatal(err)
	}
	sec := filepath.Join(dir, "security")
	caFile, otherFile := filepath.Join(sec, "ca.pem"), filepath.Join(dir, "other.PEM")
	pki.WriteFile(t, caFile, authority.PEM)
	pki.WriteFile(t, otherFile, other.PEM)
	node := openSearchNodePEM(t, authority, filepath.Join(sec, "node.pem"), filepath.Join(sec, "node-key.pem"), time.Now().Add(45*24*time.Hour).Truncate(time.Second))
	authority.Issue(t, filepath.Join(sec, "admin.pem"), filepath.Join(sec, "admin-key.pem"), "admin.dbcanary.test",
		time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), x509.ExtKeyUsageClientAuth)
	passwords := map[string]string{"dbcanary": "canary-" + strconv.FormatInt(time.Now().UnixNano(), 36), "dbcanary_nocreate": "nocreate-secret"}
	openSearchSecurityFiles(t, sec, passwords)
	passFile, wrongFile, nocreateFile := filepath.Join(dir, "password"), filepath.Join(dir, "wrong-password"), filepath.Join(dir, "nocreate-password")
	pki.WriteFile(t, passFile, []byte(passwords["dbcanary"]))
	pki.WriteFile(t, wrongFile, []byte("not-the-password"))
	pki.WriteFile(t, nocreateFile, []byte(passwords["dbcanary_nocreate"]))

	port := stack.FreePort(t)
	startPrivate(t, "opensearch", dir,
		"DBCANARY_OPENSEARCH_VERSION="+openSearchSecurityVersion,
		fmt.Sprintf("DBCANARY_OPENSEARCH_PORT=%d", port), fmt.Sprintf("DBCANARY_OPENSEARCH_TRANSPORT_PORT=%d", stack.FreePort(t)),
		"DBCANARY_OPENSEARCH_SECURITY_DIR="+sec)
	// Timeouts far above a healthy node's: the suite runs in make test's
	// second lane at nice 10, so this node (started from it) gets what
	// CPU is left at a load of 10-20, and the test is about what each
	// failure says, not about speed. With connect_timeout 10s every TLS
	// handshake of the once run timed out (fresh-clone CI of 7 Dec 17:12).
	target := func(name, user, passwordFile, tlsBlock string) string {
		return fmt.Sprintf(`  - name: %s
    backend: opensearch
    timeout: 45s
    ops: {index: {rate: 2}, bulk: {rate: 1}, search_default: {rate: 1}, search_term: {rate: 1}, search_phrase: {rate: 1}, get: {rate: 2}, visibility: {rate: 1}}
    opensearch:
      addresses: [https://127.0.0.1:%d]
      username: %s
      password_file: %s
      tls: %s
      replicas: 0
      connect_timeout: 30s
      request_timeout: 40s
`, name, port, user, passwordFile, tlsBlock)
	}

	// The daemon: every op for the least-privilege user over https, and the
	// node certificate's expiry.
	ops := []string{"index", "bulk", "search_default", "search_term", "search_phrase", "get", "visibility"}
	good := "{ca_file: " + caFile + "}"
	cfg := config(t, target("os-tls", "dbcanary", passFile, good))
	addr, logs := startDaemon(t, cfg)
	want := strconv.FormatInt(node.NotAfter.Unix(), 10)
	expiry := regexp.MustCompile(`(?m)^dbcanary_tls_earliest_cert_expiry_timestamp_seconds\{backend="opensearch",target="os-tls"\} (\S+)$`)
	deadline := time.Now().Add(3 * time.Minute)
	var body string
	for {
		body = tryGet("http://" + addr + "/metrics")
		missing := []string{}
		for _, op := range ops {
			if !regexp.MustCompile(`(?m)^dbcanary_op_latency_seconds_count\{backend="opensearch",op="` + op + `",result="ok",target="os-tls"\} [1-9]\d*$`).MatchString(body) {
				missing = append(missing, op)
			}
		}
		e := expiry.FindStringSubmatch(body)
		if e != nil && len(missing) == 0 {
			if f, _ := strconv.ParseFloat(e[1], 64); strconv.FormatInt(int64(f), 10) != want {
				t.Errorf("expiry gauge %s, want the node certificate's not-after %s", e[1], want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 3 min: ops without a success %v, expiry gauge %v\n%s\n--- log\n%s", missing, e, grep(body, "os-tls"), logs.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if failed := regexp.MustCompile(`(?m)^dbcanary_op_failures_total\{[^}]*target="os-tls"[^}]*\} [1-9].*$`).FindAllString(body, -1); len(failed) > 0 {
		t.Errorf("failures for the least-privilege user:\n%s\n--- log\n%s", strings.Join(failed, "\n"), logs.String())
	}
	if w := grep(logs.String(), "HTTP 403"); w != "" {
		t.Errorf("a permission the least-privilege role lacks (403 in the log):\n%s", w)
	}

	// once: the same user (its cleanup too), a wrong password, a user without
	// indices:admin/create, a client trusting another CA, and one expecting
	// another host name.
	onceCfg := config(t, target("good", "dbcanary", passFile, good), target("wrong-password", "dbcanary", wrongFile, good),
		target("no-create", "dbcanary_nocreate", nocreateFile, good), target("wrong-ca", "dbcanary", passFile, "{ca_file: "+otherFile+"}"),
		target("wrong-name", "dbcanary", passFile, "{ca_file: "+caFile+", server_name: search.example.org}"))
	octx, ocancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer ocancel()
	once := exec.CommandContext(octx, binary, "once", "--config.file", onceCfg)
	var out bytes.Buffer
	once.Stdout, once.Stderr = &out, &out
	_ = once.Run()
	for target, want := range map[string][2]string{
		"good":           {"", ""},
		"wrong-password": {"auth", "401"},
		"no-create":      {"setup", "indices:admin/create"},
		"wrong-ca":       {"tls", "certificate signed by unknown authority"},
		"wrong-name":     {"tls", "not search.example.org"},
	} {
		var rows []string
		for _, line := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(line); len(f) >= 4 && f[0] == target {
				rows = append(rows, line)
			}
		}
		if len(rows) != len(ops) {
			t.Errorf("%s: %d rows, want one per op in\n%s", target, len(rows), out.String())
		}
		for _, row := range rows {
			f := strings.Fields(row)
			switch {
			case want[0] == "" && f[3] != "ok":
				t.Errorf("%s: want ok, got: %s", target, row)
			case want[0] != "" && (len(f) < 6 || f[3] != "error" || f[5] != want[0] || !strings.Contains(row, want[1])):
				t.Errorf("%s: want cause %s saying %q, got: %s", target, want[0], want[1], row)
			}
		}
	}
	if w := grep(out.String(), "HTTP 403"); !strings.Contains(w, "no-create") || strings.Contains(w, "target=good") {
		t.Errorf("want HTTP 403s for no-create only (a line matched by a timestamp like .403Z once failed this when it looked for \"403\"):\n%s", w)
	}
	// once deletes its documents when it ends (a _bulk of deletes: the
	// least-privilege role must allow it); its index then holds none.
	admin, err := tls.LoadX509KeyPair(filepath.Join(sec, "admin.pem"), filepath.Join(sec, "admin-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(authority.Cert)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{admin}}}}
	countURL := fmt.Sprintf("https://127.0.0.1:%d/dbcanary-good-*/_count", port)
	var count string
	deadline = time.Now().Add(time.Minute)
	for {
		if resp, err := hc.Get(countURL); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			count = string(b)
			if resp.StatusCode == 200 && strings.Contains(count, `"count":0,`) {
				break
			}
		} else {
			count = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("documents of the one-shot run left in its index a minute after it ended: %s", count)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if strings.Contains(out.String(), passwords["dbcanary"]) || strings.Contains(out.String(), passwords["dbcanary_nocreate"]) {
		t.Error("a password in the output of once")
	}
	t.Logf("once:\n%s", out.String())
}
