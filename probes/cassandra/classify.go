package cassandra

import (
	"errors"
	"fmt"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// classify turns a driver error into a cause, with a message naming the
// target's contact points (never the password: the driver does not echo it).
func (p *Probe) classify(what string, err error) error {
	var pe *probes.Error
	if errors.As(err, &pe) {
		return err
	}
	wrapped := fmt.Errorf("cassandra %s: %s: %w", p.hostList, what, err)
	var un *gocql.RequestErrUnavailable
	if errors.As(err, &un) {
		wrapped = fmt.Errorf("%w (%s needs %d live replicas, %d are: a node is down, or the replication factor is larger than the cluster)", wrapped, un.Consistency, un.Required, un.Alive)
	}
	return probes.Fail(causeOf(err), wrapped)
}

func causeOf(err error) probes.Cause {
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
