package engine

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func value(g prometheus.Gauge) float64 {
	var m dto.Metric
	_ = g.Write(&m)
	return m.GetGauge().GetValue()
}

func cert(cn string, names []string, issuer string, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: names, Issuer: pkix.Name{CommonName: issuer}, NotAfter: notAfter}
}

func TestCertWatch(t *testing.T) {
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
	var w certWatch
	// A chain seen before the metrics are attached sets the gauge at attach.
	ca := cert("CA", nil, "CA", now.Add(300*day))
	w.observe([]*x509.Certificate{cert("node1", []string{"n1"}, "CA", now.Add(60*day)), ca}, now)
	w.attach(func() prometheus.Gauge { return g })
	if v := value(g); v != float64(now.Add(60*day).Unix()) {
		t.Fatalf("gauge after attach %v", v)
	}
	// A second node whose certificate expires first sets the target's earliest.
	got, subject := w.observe([]*x509.Certificate{cert("node2", []string{"n2"}, "CA", now.Add(10*day)), ca}, now)
	if !got.Equal(now.Add(10*day)) || subject != "CN=node2" || value(g) != float64(now.Add(10*day).Unix()) {
		t.Errorf("two nodes: %s %s", got, subject)
	}
	// node2 renewed: its old certificate no longer counts.
	got, _ = w.observe([]*x509.Certificate{cert("node2", []string{"n2"}, "CA", now.Add(90*day)), ca}, now)
	if !got.Equal(now.Add(60 * day)) {
		t.Errorf("after renewal: %s, want node1's %s", got, now.Add(60*day))
	}
	// An intermediate that expires before the leaf is what must be renewed.
	got, subject = w.observe([]*x509.Certificate{cert("node3", []string{"n3"}, "Int", now.Add(90*day)), cert("Int", nil, "CA", now.Add(3*day))}, now)
	if !got.Equal(now.Add(3*day)) || subject != "CN=Int" {
		t.Errorf("intermediate: %s %s", got, subject)
	}
	// The memory is bounded.
	for i := range 2 * maxCertIdentities {
		w.observe([]*x509.Certificate{cert("n", []string{string(rune('a' + i))}, "CA", now.Add(100*day))}, now.Add(time.Duration(i)*time.Second))
	}
	if len(w.seen) != maxCertIdentities {
		t.Errorf("%d identities kept, want %d", len(w.seen), maxCertIdentities)
	}
}

// TestCertWatchNoTLS: a target that never completes a TLS handshake exports no series.
func TestCertWatchNoTLS(t *testing.T) {
	var w certWatch
	created := 0
	w.attach(func() prometheus.Gauge { created++; return prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"}) })
	if created != 0 {
		t.Errorf("gauge created for a plaintext target")
	}
}
