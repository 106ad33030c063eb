//go:build integration

// Package compat runs dbcanary's real probes against the store versions and
// implementations of docs/compatibility.md that `make test` does not run:
// SeaweedFS's S3 gateway, OpenStack Swift's s3api over https, OpenSearch
// 1.3.x, an OpenSearch that sheds load (429) and Cassandra 4.1. Every server is a real one
// started by the project's scripts (test/stack/) on 127.0.0.1, on ports of its
// own, and stopped when the package's tests end.
//
// These rows are `make test-compat` (DBCANARY_COMPAT=1): they build and start
// servers make test has no time for (SeaweedFS is a large build). Without
// DBCANARY_COMPAT=1 the package runs no test and says so, so that the
// integration run of make test, which finds every package with an integration
// tag, passes over it.
package compat

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/pki"
	"github.com/dbcanary/dbcanary/test/stack"
)

func TestMain(m *testing.M) {
	if os.Getenv("DBCANARY_COMPAT") != "1" {
		fmt.Println("test/compat: no test run: these rows run with DBCANARY_COMPAT=1 (make test-compat), see docs/compatibility.md")
		os.Exit(0)
	}
	stack.Exit(m.Run())
}

// compatDir is the stack directory of the servers this package starts with
// settings of their own (another version, TLS): beside the default stack's,
// kept between runs so downloads stay cached; its servers are stopped.
func compatDir() string { return stack.DataDir() + "-compat" }

// startPrivate starts a server with test/stack/<script>.sh, the stack
// directory compatDir()/<name> (one per shape: versions never share a data
// directory) and the DBCANARY_* settings in env, stops it when the test ends,
// and returns what `<script>.sh env` prints.
func startPrivate(t *testing.T, script, name string, env ...string) stack.Env {
	t.Helper()
	run := func(action string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(stack.Dir(), script+".sh"), action)
		cmd.Env = append(append(os.Environ(), "DBCANARY_STACK_DIR="+filepath.Join(compatDir(), name)), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Errorf("stop %s: %v\n%s", script, err, out)
		}
	})
	t0 := time.Now()
	if out, err := run("start"); err != nil {
		t.Fatalf("start %s: %v\n%s", script, err, out)
	}
	t.Logf("%s started in %s", script, time.Since(t0).Round(100*time.Millisecond))
	out, err := run("env")
	if err != nil {
		t.Fatalf("%s.sh env: %v", script, err)
	}
	e := stack.Env{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			e[k] = v
		}
	}
	return e
}

// writeFile writes a file or fails the test.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// newCA makes a self-signed CA (test/pki) and returns its certificate, key and DER.
func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	a := pki.NewCA(t, name)
	return a.Cert, a.Key, a.Cert.Raw
}

// serverCert makes a CA and a server certificate it signed for 127.0.0.1 and
// localhost, valid for a day, and writes ca.pem, cert.pem and key.pem (PKCS#8)
// into dir, and other-ca.pem: a CA that did not sign it.
func serverCert(t *testing.T, dir string) {
	t.Helper()
	caCert, caKey, caDER := newCA(t, "dbcanary compat test CA")
	_, _, otherDER := newCA(t, "some other CA")
	writeFile(t, filepath.Join(dir, "other-ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: otherDER}))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "swift.dbcanary.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	writeFile(t, filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// everyOp runs the engine on a one-target config whose ops (every op of the
// backend, ledger ops excluded: see the ledger subtests) run at 1/s, until
// each op succeeded `runs` times, and fails on any op failure, naming its
// cause.
func everyOp(t *testing.T, yaml string, runs uint64, within time.Duration) {
	t.Helper()
	h := enginetest.Start(t, yaml)
	if len(h.Config.Targets) != 1 {
		t.Fatalf("want one target, got %d", len(h.Config.Targets))
	}
	var ops []string
	for _, s := range h.Config.Targets[0].Probe.Ops() {
		if !strings.HasPrefix(s.Name, "ledger_") {
			ops = append(ops, s.Name)
		}
	}
	failures := func() []string {
		var out []string
		for _, m := range h.Find(t, "dbcanary_op_failures_total", nil) {
			if m.GetCounter().GetValue() > 0 {
				out = append(out, fmt.Sprint(m.GetLabel()))
			}
		}
		return out
	}
	var missing []string
	enginetest.WaitFor(t, within, fmt.Sprintf("%d successful runs of every op (%s)", runs, strings.Join(ops, " ")), func() bool {
		if f := failures(); len(f) > 0 {
			t.Fatalf("op failures: %v", f)
		}
		missing = missing[:0]
		for _, op := range ops {
			if h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": op, "result": "ok"}) < runs {
				missing = append(missing, op)
			}
		}
		return len(missing) == 0
	})
	h.Engine.Stop()
	if f := failures(); len(f) > 0 {
		t.Fatalf("op failures: %v", f)
	}
	t.Logf("every op ok at least %d times: %s", runs, strings.Join(ops, " "))
}

// ledgerOps runs only the durability ledger's ops, a write every second.
const ledgerOps = `"*": {rate: 0}, ledger_write: {rate: 1}, ledger_check: {rate: 1}`

// ledgerRow runs the engine on a one-target config with ledgerOps and ages of
// 10 s until at least 3 acknowledged writes were read back intact, and fails
// on any op failure or any write read back missing or corrupted.
func ledgerRow(t *testing.T, yaml, target string) {
	t.Helper()
	h := enginetest.Start(t, yaml)
	checks := func(result string) float64 {
		return h.Value(t, "dbcanary_ledger_checks_total", enginetest.L{"target": target, "result": result})
	}
	failures := func() float64 { return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": target}) }
	enginetest.WaitFor(t, 3*time.Minute, "3 ledger entries read back intact", func() bool {
		if f, lost := failures(), checks("missing")+checks("corrupted"); f > 0 || lost > 0 {
			t.Fatalf("%g op failures, %g entries missing or corrupted on a healthy store", f, lost)
		}
		return checks("intact") >= 3
	})
	// Read before Stop: stopping closes the ledger, and its series go with it.
	intact, lost := checks("intact"), checks("missing")+checks("corrupted")
	h.Engine.Stop()
	if lost > 0 {
		t.Fatalf("%g entries missing or corrupted on a healthy store", lost)
	}
	t.Logf("ledger: %g writes read back intact at 10s, none missing or corrupted", intact)
}

// runOp runs one op of a probe with a timeout.
func runOp(p probes.Probe, op string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out probes.Outcome
	out.Reset(time.Now())
	return p.Run(ctx, op, &out)
}

// prepare runs a probe's Prepare with a timeout.
func prepare(p probes.Probe, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Prepare(ctx)
}
