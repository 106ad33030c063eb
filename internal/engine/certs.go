package engine

import (
	"crypto/x509"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxCertIdentities bounds the certificates remembered per target: one per
// node certificate of a cluster is the expected count.
const maxCertIdentities = 64

// CertObserver is implemented by an Observer that also wants the earliest
// certificate expiry a target's store presented (the status page does).
type CertObserver interface {
	CertExpiry(target string, notAfter time.Time, subject string)
}

// certWatch keeps, per certificate identity (leaf subject, names and issuer),
// the earliest not-after of the chain the store last presented with it: a
// renewed certificate replaces its predecessor, while the nodes of a cluster
// with certificates of their own are each counted. The earliest of them is
// the target's dbcanary_tls_earliest_cert_expiry_timestamp_seconds.
type certWatch struct {
	mu       sync.Mutex
	seen     map[string]certSeen
	newGauge func() prometheus.Gauge // set when the runner's metrics are attached
	gauge    prometheus.Gauge        // created at the first chain seen: no series for plaintext targets
}

type certSeen struct {
	notAfter time.Time
	subject  string // of the certificate that expires first, for the status page
	at       time.Time
}

// observe records chain and returns the target's earliest expiry and the
// subject of that certificate.
func (w *certWatch) observe(chain []*x509.Certificate, now time.Time) (time.Time, string) {
	leaf := chain[0]
	id := leaf.Subject.String() + "|" + strings.Join(leaf.DNSNames, ",") + "|" + leaf.Issuer.String()
	first := certSeen{notAfter: leaf.NotAfter, subject: leaf.Subject.String(), at: now}
	for _, c := range chain[1:] {
		if c.NotAfter.Before(first.notAfter) {
			first.notAfter, first.subject = c.NotAfter, c.Subject.String()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[string]certSeen{}
	}
	w.seen[id] = first
	if len(w.seen) > maxCertIdentities {
		// Forget the identity seen longest ago (a node that left the cluster).
		ids := make([]string, 0, len(w.seen))
		for k := range w.seen {
			ids = append(ids, k)
		}
		sort.Slice(ids, func(i, j int) bool { return w.seen[ids[i]].at.Before(w.seen[ids[j]].at) })
		delete(w.seen, ids[0])
	}
	earliest := w.earliestLocked()
	w.setLocked(earliest)
	return earliest.notAfter, earliest.subject
}

func (w *certWatch) setLocked(e certSeen) {
	if w.gauge == nil && w.newGauge != nil && !e.notAfter.IsZero() {
		w.gauge = w.newGauge()
	}
	if w.gauge != nil {
		w.gauge.Set(float64(e.notAfter.Unix()))
	}
}

func (w *certWatch) earliestLocked() certSeen {
	var e certSeen
	for _, s := range w.seen {
		if e.notAfter.IsZero() || s.notAfter.Before(e.notAfter) {
			e = s
		}
	}
	return e
}

// attach gives the watch its gauge, set at once if a chain was already seen.
func (w *certWatch) attach(newGauge func() prometheus.Gauge) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.newGauge, w.gauge = newGauge, nil
	w.setLocked(w.earliestLocked())
}
