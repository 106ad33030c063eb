package probes

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// CertObserver learns the certificate chain a store presented in each TLS
// handshake that verified (or that verification was skipped for), so that the
// engine can export the earliest expiry an operator must renew before.
type CertObserver interface {
	CertsSeen(chain []*x509.Certificate)
}

// TLSConfig is the TLS block shared by every backend section.
type TLSConfig struct {
	// Enabled turns TLS on where the URL scheme does not already say so.
	Enabled bool `yaml:"enabled"`
	// CAFile verifies the server against this CA bundle instead of the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile present a client certificate (mutual TLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked against the server certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify disables verification; dbcanary logs a warning when it is set.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Validate checks that the files exist and make sense together.
func (c *TLSConfig) Validate(prefix string) []error {
	var errs []error
	if c.CAFile != "" {
		if _, err := c.loadCA(); err != nil {
			errs = append(errs, Invalid(prefix+"ca_file", "%v", err))
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, Invalid(prefix+"cert_file", "cert_file and key_file must be set together"))
	} else if c.CertFile != "" {
		if _, err := c.loadKeyPair(); err != nil {
			errs = append(errs, Invalid(prefix+"cert_file", "cannot load client certificate: %v", err))
		}
	}
	return errs
}

// Configured reports whether any TLS setting is present.
func (c *TLSConfig) Configured() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.ServerName != "" || c.InsecureSkipVerify
}

// Build returns a *tls.Config; defaultServerName is used when ServerName is
// empty. seen, if not nil, is told every chain the store presents.
func (c *TLSConfig) Build(defaultServerName string, seen CertObserver) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // opt-in, logged as a warning
	}
	if cfg.ServerName == "" {
		cfg.ServerName = defaultServerName
	}
	if seen != nil {
		// Runs after the usual verification has passed: only chains the
		// canary accepted are counted.
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				seen.CertsSeen(cs.PeerCertificates)
			}
			return nil
		}
	}
	if c.CAFile != "" {
		pool, err := c.loadCA()
		if err != nil {
			return nil, Fail(CauseTLS, err)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := c.loadKeyPair()
		if err != nil {
			return nil, Fail(CauseTLS, fmt.Errorf("cannot load client certificate: %w", err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (c *TLSConfig) loadKeyPair() (tls.Certificate, error) {
	certPEM, err := readBounded(c.CertFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readBounded(c.KeyFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func (c *TLSConfig) loadCA() (*x509.CertPool, error) {
	pem, err := readBounded(c.CAFile, maxPEMBytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate found in %s", c.CAFile)
	}
	return pool, nil
}
