//go:build integration

package pages

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/internal/generate"
)

// roleCert is the S3 target whose endpoint presents a certificate about to
// expire (the certificate-expiry row).
const roleCert = "cert"

// certLife is how long the certificate roleCert's endpoint presents has left:
// inside the shipped critical threshold (policy.cert_expiry_critical, 7 days).
const certLife = 5 * 24 * time.Hour

// tlsGate puts an https endpoint in front of the target's proxy, as a TLS
// load balancer in front of an object store: a certificate from a CA the
// suite makes, valid for certLife more. It returns the gate's address and
// the CA file the target trusts.
func (d *daemon) tlsGate(upstreamAddr string) (addr, caFile string) {
	t := d.t
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "dbcanary page-quality CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano() + 1), Subject: pkix.Name{CommonName: "s3.pages.dbcanary.test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLife),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(d.dir, "pages-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://" + upstreamAddr)
	// The request keeps its Host header: MinIO checks the signature the
	// client made for the gate's address.
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://"), caFile
}

// certExpiry is the certificate-expiry row: the target was added (at added)
// with an endpoint whose certificate expires in certLife; the shipped
// DbcanaryTLSCertificateExpiring pages (critical), once, and no ticket.
func (s *suite) certExpiry(_ context.Context, backend string, tg *target, added time.Time) {
	f := s.add(&fault{backend: backend, kind: "cert", key: tg.name, scope: []string{tg.name}, windowStart: added,
		expect: generate.AlertTLSCertExpiring, expectSev: "critical", budget: s.budget(generate.AlertTLSCertExpiring)})
	// The fault is there from the target's addition: its first handshake.
	f.start = added
	f.what = fmt.Sprintf("target added behind an https endpoint (a TLS gate in front of its proxy) whose certificate expires in %d days (critical threshold policy.cert_expiry_critical: 7 days)", int(certLife.Hours()/24))
	s.logf("%s: %s", tg.name, f.what)
	if _, ok := s.waitAlert(f); ok {
		s.waitPage(f)
	}
	f.reverted = time.Now()
}
