package rabbitmq

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/probes"
)

// TestClassifyHandshakeFailures: amqp091 flattens socket and TLS failures of
// the handshake into a 501 with the error's text; the text decides the cause.
func TestClassifyHandshakeFailures(t *testing.T) {
	p := &Probe{urls: []string{"amqps://127.0.0.1:5671/"}}
	for reason, want := range map[string]probes.Cause{
		"remote error: tls: certificate required":       probes.CauseTLS,
		"remote error: tls: bad certificate":            probes.CauseTLS,
		"x509: certificate signed by unknown authority": probes.CauseTLS,
		"read tcp 127.0.0.1:5671: i/o timeout":          probes.CauseTimeout,
		"read: connection reset by peer":                probes.CauseRefused,
	} {
		err := p.classify("connect", &amqp.Error{Code: amqp.FrameError, Reason: reason})
		if got := probes.CauseOf(err); got != want {
			t.Errorf("%q: cause %s, want %s", reason, got, want)
		}
	}
}
