//go:build integration

package tls

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/pki"
	"github.com/dbcanary/dbcanary/test/stack"
)

// TestExpiredServerCertificates: a Cassandra node and a RabbitMQ broker
// whose certificate expired yesterday (signed by the CA the client trusts):
// every op fails with cause tls saying the certificate has expired (MinIO's
// is in TestTLSFailuresSayWhich). It starts two more private servers, so it
// runs in make test-compat (DBCANARY_COMPAT=1), not in make test, which keeps
// one TLS round trip per backend.
func TestExpiredServerCertificates(t *testing.T) {
	if os.Getenv("DBCANARY_COMPAT") != "1" {
		t.Skip("run by make test-compat-stores (DBCANARY_COMPAT=1): two more private servers")
	}
	authority := newCA(t, "dbcanary test CA")
	expiredFrom, expiredTo := time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)

	// RabbitMQ over amqps, its broker certificate expired.
	mq := privateTLSBrokerCert(t, authority, expiredFrom, expiredTo)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	pki.WriteFile(t, caFile, authority.PEM)
	clientCert, clientKey := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	authority.Issue(t, clientCert, clientKey, "dbcanary", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), x509.ExtKeyUsageClientAuth)
	mqTarget := fmt.Sprintf(`  - name: mq-expired
    backend: rabbitmq
    ops: {publish: {rate: 1}, consume: {}}
    rabbitmq:
      url: %s
      username: %s
      password_file: %s
      connect_timeout: 5s
      tls: {ca_file: %s, cert_file: %s, key_file: %s}
`, mq.Get(t, "DBCANARY_TEST_RABBITMQ_TLS_URL"), mq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), mq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"), caFile, clientCert, clientKey)

	// Cassandra with client_encryption_options, its node certificate expired.
	cdir, err := os.MkdirTemp("", "dbcanary-tls-cass-expired-")
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := filepath.Join(cdir, "tls")
	pki.WriteFile(t, filepath.Join(tlsDir, "ca.pem"), authority.PEM)
	cassandraServerPEMValid(t, authority, filepath.Join(tlsDir, "server.pem"), expiredFrom, expiredTo)
	cql := stack.FreePort(t)
	startPrivate(t, "cassandra", cdir,
		"DBCANARY_CASSANDRA_HEAP_MAX=512M",
		fmt.Sprintf("DBCANARY_CASSANDRA_PORT=%d", cql), fmt.Sprintf("DBCANARY_CASSANDRA_STORAGE_PORT=%d", stack.FreePort(t)),
		"DBCANARY_CASSANDRA_TLS_DIR="+tlsDir)
	casTarget := fmt.Sprintf(`  - name: cas-expired
    backend: cassandra
    ops: {insert: {rate: 1}, read: {rate: 1}}
    cassandra:
      hosts: ["127.0.0.1"]
      port: %d
      username: cassandra
      password_file: %s
      local_dc: datacenter1
      keyspace: dbcanary_tls
      replication: {class: SimpleStrategy, replication_factor: 1}
      connect_timeout: 10s
      tls: {ca_file: %s}
`, cql, filepath.Join(cdir, "cassandra", "password"), caFile)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	once := exec.CommandContext(ctx, binary, "once", "--config.file", config(t, mqTarget, casTarget))
	var out bytes.Buffer
	once.Stdout, once.Stderr = &out, &out
	_ = once.Run()
	for _, target := range []string{"mq-expired", "cas-expired"} {
		rows := grep(out.String(), target+" ")
		if rows == "" {
			t.Errorf("%s: no row in\n%s", target, out.String())
		}
		for _, row := range strings.Split(rows, "\n") {
			if f := strings.Fields(row); len(f) < 6 || f[3] != "error" || f[5] != "tls" || !strings.Contains(row, "certificate has expired") {
				t.Errorf("%s: want cause tls saying the certificate has expired, got: %s", target, row)
			}
		}
	}
	t.Logf("once:\n%s", out.String())
}
