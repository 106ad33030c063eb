package web

import (
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/status"
)

func TestCertCell(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		left  time.Duration
		class string
		when  string
	}{
		{90 * 24 * time.Hour, `class="cert"`, "(in 90 days)"},
		{5 * 24 * time.Hour, `class="cert soon"`, "(in 5 days)"},
		{30 * time.Hour, `class="cert soon"`, "(in 30h)"},
		{-3 * 24 * time.Hour, `class="cert expired"`, "(3 days ago)"},
	} {
		got := string(certCell(now, &status.CertStatus{NotAfter: now.Add(tc.left), Subject: `CN=<node>`}))
		if !strings.Contains(got, tc.class) || !strings.Contains(got, tc.when) || !strings.Contains(got, now.Add(tc.left).Format("2006-01-02")) ||
			!strings.Contains(got, "CN=&lt;node&gt;") {
			t.Errorf("%s left: %s", tc.left, got)
		}
	}
	if certCell(now, nil) != "" {
		t.Error("a plaintext target shows a certificate")
	}
}
