package cassandra

import (
	"errors"
	"fmt"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// classify turns a driver error into a cause, with a message naming the
// target's contact points (never the password: the driver does not echo it)
// and, when the coordinator refused the request, its own reason with the
// numbers it sent (see storeReason).
func (p *Probe) classify(what string, err error) error {
	var pe *probes.Error
	if errors.As(err, &pe) {
		return err
	}
	if reason := storeReason(err); reason != "" {
		return probes.Fail(causeOf(err), fmt.Errorf("cassandra %s: %s: %s: %w", p.hostList, what, reason, err))
	}
	if p.cfg.TLS.Configured() && p.cfg.TLS.CertFile == "" && strings.Contains(err.Error(), "connection startup") {
		return probes.Fail(causeOf(err), fmt.Errorf("cassandra %s: %s: %w (%s)", p.hostList, what, err, noClientCertHint))
	}
	return probes.Fail(causeOf(err), fmt.Errorf("cassandra %s: %s: %w", p.hostList, what, err))
}

// noClientCertHint explains a startup timeout over TLS without a client
// certificate: a node with client_encryption_options.require_client_auth
// closes the connection after the handshake with a certificate_required
// alert, which the driver can miss (it then reports no response to STARTUP).
const noClientCertHint = "over TLS without a client certificate: a node whose client_encryption_options require one closes such connections, which the driver may report only as this timeout; set tls.cert_file and tls.key_file if the cluster requires client certificates"

// storeReason spells out a coordinator's refusal (Unavailable, WriteTimeout,
// ReadTimeout, WriteFailure, ReadFailure, Overloaded) with the consistency
// level and the replica counts of the error frame: the driver's own text
// ("Cannot achieve consistency level QUORUM") leaves out how many replicas
// were needed and how many answered, which is what tells a down node from a
// slow one. "" for any other error. What to do is in docs/runbooks.md.
func storeReason(err error) string {
	var (
		un *gocql.RequestErrUnavailable
		wt *gocql.RequestErrWriteTimeout
		rt *gocql.RequestErrReadTimeout
		wf *gocql.RequestErrWriteFailure
		rf *gocql.RequestErrReadFailure
		ov *gocql.RequestErrOverloaded
	)
	switch {
	case errors.As(err, &un):
		return fmt.Sprintf("Unavailable: %s needs %d replicas, %d alive (the coordinator did not try: a replica's node is down, or the keyspace's replication factor is larger than the nodes of its datacenter; nodetool status)",
			un.Consistency, un.Required, un.Alive)
	case errors.As(err, &wt):
		return fmt.Sprintf("WriteTimeout: %s %s write acknowledged by %d of the %d replicas required within the server's write_request_timeout (replicas slow, overloaded or unreachable from the coordinator; nodetool status, nodetool tpstats)",
			wt.Consistency, wt.WriteType, wt.Received, wt.BlockFor)
	case errors.As(err, &rt):
		return fmt.Sprintf("ReadTimeout: %s read answered by %d of the %d replicas required, data present: %s, within the server's read_request_timeout (replicas slow, overloaded or unreachable from the coordinator; nodetool status, nodetool tpstats)",
			rt.Consistency, rt.Received, rt.BlockFor, yesNo(rt.DataPresent != 0))
	case errors.As(err, &wf):
		return fmt.Sprintf("WriteFailure: %s %s write acknowledged by %d of the %d replicas required, %d failed (a replica's system.log says why)",
			wf.Consistency, wf.WriteType, wf.Received, wf.BlockFor, wf.NumFailures)
	case errors.As(err, &rf):
		return fmt.Sprintf("ReadFailure: %s read answered by %d of the %d replicas required, %d failed, data present: %s (a replica's system.log says why, e.g. too many tombstones)",
			rf.Consistency, rf.Received, rf.BlockFor, rf.NumFailures, yesNo(rf.DataPresent))
	case errors.As(err, &ov):
		return "Overloaded: the coordinator shed the request (native transport queue full or a rate limit; nodetool tpstats)"
	}
	return ""
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func causeOf(err error) probes.Cause {
	var (
		wt *gocql.RequestErrWriteTimeout
		rt *gocql.RequestErrReadTimeout
	)
	if errors.As(err, &wt) || errors.As(err, &rt) {
		return probes.CauseTimeout // the replicas did not answer the coordinator in time
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		switch re.Code() {
		case gocql.ErrCodeCredentials:
			return probes.CauseAuth
		case gocql.ErrCodeUnauthorized:
			return probes.CauseSetup // logged in, but a GRANT is missing
		case gocql.ErrCodeWriteTimeout, gocql.ErrCodeReadTimeout:
			return probes.CauseTimeout
		}
		return probes.CauseServer
	}
	switch {
	case errors.Is(err, gocql.ErrTimeoutNoResponse):
		return probes.CauseTimeout
	case errors.Is(err, gocql.ErrNoConnections), errors.Is(err, gocql.ErrNoConnectionsStarted),
		errors.Is(err, gocql.ErrConnectionClosed), errors.Is(err, gocql.ErrSessionClosed):
		return probes.CauseRefused
	}
	if c := probes.Classify(err); c != probes.CauseOther {
		return c
	}
	// CreateSession flattens its errors into text (fmt.Errorf with %v).
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Provided username"), strings.Contains(msg, "authentication"),
		strings.Contains(msg, "Authentication"), strings.Contains(msg, "credentials"):
		return probes.CauseAuth
	case strings.Contains(msg, "x509:"), strings.Contains(msg, "tls:"):
		return probes.CauseTLS
	case strings.Contains(msg, "no such host"):
		return probes.CauseDNS
	case strings.Contains(msg, "i/o timeout"), strings.Contains(msg, "deadline exceeded"):
		return probes.CauseTimeout
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "connection reset"),
		strings.Contains(msg, "no connections were made"), strings.Contains(msg, "EOF"):
		return probes.CauseRefused
	case strings.Contains(msg, "CQL frame"), strings.Contains(msg, "CQL v3-v5"),
		strings.Contains(msg, "protocol error"), strings.Contains(msg, "unexpected"),
		strings.Contains(msg, "unknown op"), strings.Contains(msg, "invalid"):
		// The frame guard's errors, and the driver's own for answers it cannot parse.
		return probes.CauseServer
	}
	return probes.CauseOther
}

// namespaceGone reports whether a request failed because the canary's
// keyspace or table was dropped behind its back.
func namespaceGone(err error) bool {
	var re gocql.RequestError
	if !errors.As(err, &re) || re.Code() != gocql.ErrCodeInvalid {
		return false
	}
	m := re.Message()
	return strings.Contains(m, "unconfigured table") || strings.Contains(m, "does not exist")
}
