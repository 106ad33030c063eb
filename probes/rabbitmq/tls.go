package rabbitmq

import (
	"crypto/tls"
	"net"

	"github.com/dbcanary/dbcanary/probes"
)

// tlsClient performs the TLS handshake on an already dialled socket.
func tlsClient(c net.Conn, cfg *tls.Config) (net.Conn, error) {
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return nil, probes.Fail(probes.CauseTLS, err)
	}
	return tc, nil
}
