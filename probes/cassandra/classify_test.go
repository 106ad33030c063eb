package cassandra

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// TestStoreReason: a coordinator's refusal carries its consistency level and
// replica counts into the error text, with the cause the runbook reads.
func TestStoreReason(t *testing.T) {
	p := &Probe{hostList: "10.0.0.1,10.0.0.2"}
	for _, tc := range []struct {
		err   error
		cause probes.Cause
		want  []string
	}{
		{&gocql.RequestErrUnavailable{Consistency: gocql.Quorum, Required: 2, Alive: 1}, probes.CauseServer,
			[]string{"cassandra 10.0.0.1,10.0.0.2: insert: Unavailable: QUORUM needs 2 replicas, 1 alive (", "nodetool status"}},
		{&gocql.RequestErrWriteTimeout{Consistency: gocql.LocalQuorum, Received: 1, BlockFor: 2, WriteType: "SIMPLE"}, probes.CauseTimeout,
			[]string{"insert: WriteTimeout: LOCAL_QUORUM SIMPLE write acknowledged by 1 of the 2 replicas required within the server's write_request_timeout", "nodetool tpstats"}},
		{&gocql.RequestErrReadTimeout{Consistency: gocql.All, Received: 3, BlockFor: 3, DataPresent: 0}, probes.CauseTimeout,
			[]string{"insert: ReadTimeout: ALL read answered by 3 of the 3 replicas required, data present: no,"}},
		{&gocql.RequestErrReadTimeout{Consistency: gocql.One, Received: 0, BlockFor: 1, DataPresent: 1}, probes.CauseTimeout,
			[]string{"ReadTimeout: ONE read answered by 0 of the 1 replicas required, data present: yes,"}},
		{&gocql.RequestErrWriteFailure{Consistency: gocql.Quorum, Received: 1, BlockFor: 2, NumFailures: 1, WriteType: "BATCH"}, probes.CauseServer,
			[]string{"WriteFailure: QUORUM BATCH write acknowledged by 1 of the 2 replicas required, 1 failed"}},
		{&gocql.RequestErrReadFailure{Consistency: gocql.Quorum, Received: 1, BlockFor: 2, NumFailures: 1, DataPresent: true}, probes.CauseServer,
			[]string{"ReadFailure: QUORUM read answered by 1 of the 2 replicas required, 1 failed, data present: yes", "tombstones"}},
		{&gocql.RequestErrOverloaded{}, probes.CauseServer,
			[]string{"insert: Overloaded: the coordinator shed the request", "nodetool tpstats"}},
	} {
		// Wrapped as the driver's retry and query paths may return it.
		got := p.classify("insert", fmt.Errorf("query: %w", tc.err))
		if c := probes.CauseOf(got); c != tc.cause {
			t.Errorf("%T: cause %q, want %q (%v)", tc.err, c, tc.cause, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("%T: %q\ndoes not say %q", tc.err, got, w)
			}
		}
	}
	if r := storeReason(gocql.ErrNoConnections); r != "" {
		t.Errorf("a client-side error has a store reason: %q", r)
	}
	if got := p.classify("read", gocql.ErrNoConnections).Error(); got != "cassandra 10.0.0.1,10.0.0.2: read: "+gocql.ErrNoConnections.Error() {
		t.Errorf("other errors changed: %q", got)
	}
}

// TestClassifyStartupTimeoutOverTLSWithoutClientCert: the hint names the
// client certificate only where it can be the cause.
func TestClassifyStartupTimeoutOverTLSWithoutClientCert(t *testing.T) {
	startup := errors.New("gocql: unable to create session: unable to connect to initial hosts: gocql: no response to connection startup within timeout")
	for _, c := range []struct {
		name string
		tls  probes.TLSConfig
		hint bool
	}{
		{"plaintext", probes.TLSConfig{}, false},
		{"tls without a client certificate", probes.TLSConfig{Enabled: true}, true},
		{"tls with a client certificate", probes.TLSConfig{Enabled: true, CertFile: "c.pem", KeyFile: "k.pem"}, false},
	} {
		p := &Probe{hostList: "127.0.0.1"}
		p.cfg.TLS = c.tls
		err := p.classify("connect", startup)
		if got := strings.Contains(err.Error(), "set tls.cert_file and tls.key_file"); got != c.hint {
			t.Errorf("%s: hint %v, want %v: %v", c.name, got, c.hint, err)
		}
		if !errors.Is(err, startup) {
			t.Errorf("%s: the driver's error is not wrapped: %v", c.name, err)
		}
	}
}
