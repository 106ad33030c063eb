package cassandra

import (
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestFacts: the rules and boards know exactly the ops of both profiles.
func TestFacts(t *testing.T) {
	f, ok := probes.FactsOf("cassandra")
	if !ok {
		t.Fatal("cassandra is not described")
	}
	mixed, ycsb := DefaultConfig, DefaultConfig
	mixed.Profile, ycsb.Profile = ProfileMixed, ProfileYCSBA
	for _, err := range probes.CheckFacts(f, &mixed, &ycsb) {
		t.Error(err)
	}
}
