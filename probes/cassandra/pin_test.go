package cassandra

import (
	"context"
	"net"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// TestPinnedHosts: pin_hosts accepts a node only at an address a configured
// host names (IP, host:port or a name), and a name that does not resolve is
// cause dns naming it, not a panic.
func TestPinnedHosts(t *testing.T) {
	p := &Probe{hostList: "127.0.0.2,127.0.0.3:19342,localhost"}
	p.cfg.Hosts = []string{"127.0.0.2", "127.0.0.3:19342", "localhost"}
	f, err := p.pinnedHosts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]bool{"127.0.0.1": true, "127.0.0.2": true, "127.0.0.3": true, "127.0.0.4": false, "10.0.0.2": false} {
		h, err := gocql.NewHostInfoFromAddrPort(net.ParseIP(ip), 9042)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Accept(h); got != want {
			t.Errorf("node %s accepted %v, want %v", ip, got, want)
		}
	}
	p.cfg.Hosts = []string{"127.0.0.2", "no-such-node.invalid"}
	if _, err := p.pinnedHosts(context.Background()); probes.CauseOf(err) != probes.CauseDNS {
		t.Errorf("unresolvable host: %v (cause %s), want dns", err, probes.CauseOf(err))
	}
}
