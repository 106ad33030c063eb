package all

import (
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestEveryBackendDescribed: every backend linked into the daemon declares
// its rule and board facts in its one record (probes/<backend>/register.go),
// and they cover every op of the backend's default configuration.
func TestEveryBackendDescribed(t *testing.T) {
	for _, name := range probes.Names() {
		be, _ := probes.Lookup(name)
		if !be.Facts.Declared() {
			t.Errorf("%s: registered without facts", name)
		}
		for _, err := range probes.CheckFacts(be.Facts, be.NewConfig()) {
			// Ops of other profiles are checked by the probe's own register_test.go.
			if !strings.Contains(err.Error(), "which no configuration runs") {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// TestEveryNetworkBackendNamesItsEndpoints: every backend but noop says
// where its target is (probes.Endpointer), so `dbcanary bench` can refuse a
// target off loopback without knowing the backend.
func TestEveryNetworkBackendNamesItsEndpoints(t *testing.T) {
	for _, name := range probes.Names() {
		be, _ := probes.Lookup(name)
		_, ok := be.NewConfig().(probes.Endpointer)
		if want := name != "noop"; ok != want {
			t.Errorf("%s: implements probes.Endpointer %v, want %v", name, ok, want)
		}
	}
}

// TestStores: the help text and landing page name the stores from the registry.
func TestStores(t *testing.T) {
	if got, want := probes.Stores(), "Cassandra, OpenSearch, RabbitMQ and S3"; got != want {
		t.Errorf("Stores() = %q, want %q", got, want)
	}
}
