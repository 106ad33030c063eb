package probes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/xml"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// Cause is why an op failed: a small fixed set, safe as a metric label value.
type Cause string

// The failure causes. Keep this set small and fixed: it is a label value.
const (
	CauseTimeout  Cause = "timeout"   // the op did not finish within its timeout
	CauseRefused  Cause = "refused"   // connection refused or reset: nothing listening, or it hung up
	CauseDNS      Cause = "dns"       // the host name did not resolve
	CauseTLS      Cause = "tls"       // handshake or certificate verification failed
	CauseAuth     Cause = "auth"      // credentials rejected (wrong user or password, expired key)
	CauseSetup    Cause = "setup"     // the canary cannot use its namespace: missing bucket/index/keyspace or a missing grant/permission
	CauseNotFound Cause = "not_found" // what the canary wrote is gone (before its TTL)
	CauseMismatch Cause = "mismatch"  // what was read back differs from what was written
	CauseLost     Cause = "lost"      // a message was never delivered within its bound
	CauseStale    Cause = "stale"     // a read missed a write that the configured consistency levels allow it to miss: not data loss
	CauseServer   Cause = "server"    // the server answered with an error or with garbage
	CauseBacklog  Cause = "backlog"   // the op could not start within its timeout: in-flight bound reached
	CauseOther    Cause = "other"     // anything else (see the debug log)
)

// Causes lists every cause, in a stable order (metrics pre-create a series for each).
var Causes = []Cause{
	CauseTimeout, CauseRefused, CauseDNS, CauseTLS, CauseAuth, CauseSetup, CauseNotFound,
	CauseMismatch, CauseLost, CauseStale, CauseServer, CauseBacklog, CauseOther,
}

// DataCause reports whether a cause means the store answered but the data was
// wrong: the target is up, yet integrity failed.
func (c Cause) DataCause() bool {
	return c == CauseMismatch || c == CauseNotFound || c == CauseLost
}

// ConfigCause reports whether a cause is a setup mistake an operator fixes in
// configuration or grants (credentials, missing bucket, missing permission):
// the target is down, and it pages as a configuration problem, never as data loss.
func (c Cause) ConfigCause() bool { return c == CauseAuth || c == CauseSetup }

// Error is an op failure with its classified cause.
type Error struct {
	Cause Cause
	Err   error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Cause)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Fail wraps err with a cause. A nil err yields an error saying only the cause.
func Fail(c Cause, err error) error { return &Error{Cause: c, Err: err} }

// CauseOf classifies an error: an explicit cause set with Fail wins, then
// timeouts, refused connections, DNS and TLS failures are recognised from the
// standard library's error types.
func CauseOf(err error) Cause {
	if err == nil {
		return ""
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Cause
	}
	return Classify(err)
}

// Classify maps standard network errors to a cause, without looking at any
// cause set by Fail. Probes use it for errors from their client libraries.
func Classify(err error) Cause {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return CauseTimeout
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsTimeout {
			return CauseTimeout
		}
		return CauseDNS
	}
	var (
		recordErr  tls.RecordHeaderError
		alertErr   tls.AlertError
		verifyErr  *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
	)
	if errors.As(err, &recordErr) || errors.As(err, &alertErr) || errors.As(err, &verifyErr) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalidErr) {
		return CauseTLS
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) { // the transport closed a connection the server reset mid-request
		return CauseRefused
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return CauseTimeout
	}
	var xmlErr *xml.SyntaxError
	if errors.As(err, &xmlErr) {
		return CauseServer
	}
	// Client libraries flatten some standard-library errors into text.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"),
		strings.Contains(msg, "first record does not look like a TLS handshake"):
		return CauseTLS
	case strings.Contains(msg, "malformed HTTP"), strings.Contains(msg, "server response headers exceeded"),
		strings.Contains(msg, "XML syntax error"), strings.Contains(msg, "unexpected EOF reading trailer"),
		strings.Contains(msg, "invalid character") && strings.Contains(msg, "looking for beginning of value"):
		return CauseServer
	case strings.Contains(msg, "Connection closed by foreign host"), strings.Contains(msg, "connection reset by peer"),
		strings.Contains(msg, "broken pipe"), strings.Contains(msg, "server closed idle connection"),
		strings.Contains(msg, "use of closed network connection"):
		return CauseRefused
	}
	return CauseOther
}
