package all

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestEveryBackendDescribed: every registered backend describes its rule and
// board facts (probes/<backend>/facts.go), nothing else does, and the facts
// cover every op of the backend's default configuration.
func TestEveryBackendDescribed(t *testing.T) {
	names := probes.Names()
	if !slices.Equal(names, probes.Described()) {
		t.Fatalf("registered %v, described %v: each probe registers and describes itself", names, probes.Described())
	}
	for _, name := range names {
		be, _ := probes.Lookup(name)
		f, _ := probes.FactsOf(name)
		for _, err := range probes.CheckFacts(f, be.NewConfig()) {
			// Ops of other profiles are checked by the probe's own facts_test.go.
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
