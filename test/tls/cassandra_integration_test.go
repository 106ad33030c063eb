//go:build integration

package tls

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/pki"
	"github.com/dbcanary/dbcanary/test/stack"
)

// cassandraServerPEM writes the node's PEM keystore for Cassandra's
// PEMBasedSslContextFactory: an unencrypted PKCS#8 RSA key, then the
// certificate (for 127.0.0.1), signed by c.
func cassandraServerPEM(t *testing.T, c *ca, path string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	return cassandraServerPEMValid(t, c, path, time.Now().Add(-time.Hour), notAfter)
}

// cassandraServerPEMValid is cassandraServerPEM valid from notBefore.
func cassandraServerPEMValid(t *testing.T, c *ca, path string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "cassandra.dbcanary.test"},
		NotBefore: notBefore, NotAfter: notAfter,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	pki.WriteFile(t, path, b.Bytes())
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// TestCassandraClientEncryption: a private Cassandra node with
// client_encryption_options (PEM keystore and truststore, client certificate
// required): insert and read over TLS with a client certificate, the expiry
// gauge of the node's certificate, and a client without a certificate,
// trusting another CA or expecting another host name failing with cause tls.
func TestCassandraClientEncryption(t *testing.T) {
	authority, other := newCA(t, "dbcanary test CA"), newCA(t, "some other CA")
	dir, err := os.MkdirTemp("", "dbcanary-tls-cass-")
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := filepath.Join(dir, "tls")
	pki.WriteFile(t, filepath.Join(tlsDir, "ca.pem"), authority.PEM)
	server := cassandraServerPEM(t, authority, filepath.Join(tlsDir, "server.pem"), time.Now().Add(60*24*time.Hour).Truncate(time.Second))
	otherFile := filepath.Join(tlsDir, "other.PEM")
	pki.WriteFile(t, otherFile, other.PEM)
	clientCert, clientKey := filepath.Join(tlsDir, "client.pem"), filepath.Join(tlsDir, "client-key.pem")
	authority.Issue(t, clientCert, clientKey, "dbcanary", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), x509.ExtKeyUsageClientAuth)

	cql := stack.FreePort(t)
	startPrivate(t, "cassandra", dir,
		"DBCANARY_CASSANDRA_HEAP_MAX=512M",
		fmt.Sprintf("DBCANARY_CASSANDRA_PORT=%d", cql), fmt.Sprintf("DBCANARY_CASSANDRA_STORAGE_PORT=%d", stack.FreePort(t)),
		"DBCANARY_CASSANDRA_TLS_DIR="+tlsDir, "DBCANARY_CASSANDRA_TLS_CLIENT_AUTH=true")
	target := func(name, tlsBlock string) string {
		return fmt.Sprintf(`  - name: %s
    backend: cassandra
    ops: {insert: {rate: 4}, read: {rate: 4}}
    cassandra:
      hosts: ["127.0.0.1"]
      port: %d
      username: cassandra
      password_file: %s
      local_dc: datacenter1
      keyspace: dbcanary_tls
      replication: {class: SimpleStrategy, replication_factor: 1}
      connect_timeout: 10s
      request_timeout: 10s
      tls: %s
`, name, cql, filepath.Join(dir, "cassandra", "password"), tlsBlock)
	}

	cfg := config(t, target("cass-tls", fmt.Sprintf("{ca_file: %s, cert_file: %s, key_file: %s}", filepath.Join(tlsDir, "ca.pem"), clientCert, clientKey)))
	addr, logs := startDaemon(t, cfg)
	want := strconv.FormatInt(server.NotAfter.Unix(), 10)
	expiry := regexp.MustCompile(`(?m)^dbcanary_tls_earliest_cert_expiry_timestamp_seconds\{backend="cassandra",target="cass-tls"\} (\S+)$`)
	reads := regexp.MustCompile(`(?m)^dbcanary_op_latency_seconds_count\{backend="cassandra",op="read",result="ok",target="cass-tls"\} ([1-9]\d*)$`)
	deadline := time.Now().Add(3 * time.Minute)
	var body string
	for {
		body = tryGet("http://" + addr + "/metrics")
		e := expiry.FindStringSubmatch(body)
		if e != nil && reads.MatchString(body) {
			if f, _ := strconv.ParseFloat(e[1], 64); strconv.FormatInt(int64(f), 10) != want {
				t.Errorf("expiry gauge %s, want the node certificate's not-after %s", e[1], want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no read and expiry gauge over TLS within 3 min\n%s\n--- log\n%s", grep(body, "cass-tls"), logs.String())
		}
		time.Sleep(250 * time.Millisecond)
	}

	onceCfg := config(t, target("no-client-cert", "{ca_file: "+filepath.Join(tlsDir, "ca.pem")+"}"), target("wrong-ca", "{ca_file: "+otherFile+"}"),
		target("wrong-name", fmt.Sprintf("{ca_file: %s, cert_file: %s, key_file: %s, server_name: cassandra.example.org}", filepath.Join(tlsDir, "ca.pem"), clientCert, clientKey)))
	octx, ocancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ocancel()
	once := exec.CommandContext(octx, binary, "once", "--config.file", onceCfg)
	var out bytes.Buffer
	once.Stdout, once.Stderr = &out, &out
	_ = once.Run()
	for target, want := range map[string]string{"no-client-cert": "certificate", "wrong-ca": "certificate signed by unknown authority", "wrong-name": "not cassandra.example.org"} {
		rows := grep(out.String(), target+" ")
		if rows == "" {
			t.Errorf("%s: no row in\n%s", target, out.String())
		}
		for _, row := range strings.Split(rows, "\n") {
			f := strings.Fields(row)
			// The node answers a client without a certificate with a TLS
			// alert after the handshake; gocql may miss it (a race between
			// its reader and the STARTUP request) and then reports a startup
			// timeout, to which dbcanary adds what to check.
			if target == "no-client-cert" && len(f) >= 6 && f[3] == "error" && strings.Contains(row, "connection startup") {
				if !strings.Contains(row, "set tls.cert_file and tls.key_file") {
					t.Errorf("%s: a startup timeout without the client-certificate hint: %s", target, row)
				}
				continue
			}
			if len(f) < 6 || f[3] != "error" || f[5] != "tls" || !strings.Contains(row, want) {
				t.Errorf("%s: want cause tls saying %q, got: %s", target, want, row)
			}
		}
	}
	t.Logf("once:\n%s", out.String())
}
