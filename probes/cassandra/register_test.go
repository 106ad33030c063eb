package cassandra

import (
	"testing"

	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/probetest"
)

// TestFacts: the rules and boards know exactly the ops of both profiles.
func TestFacts(t *testing.T) {
	be, ok := probes.Lookup("cassandra")
	if !ok {
		t.Fatal("cassandra is not registered")
	}
	mixed, ycsb := DefaultConfig, DefaultConfig
	mixed.Profile, ycsb.Profile = ProfileMixed, ProfileYCSBA
	for _, err := range probetest.CheckFacts(be.Facts, &mixed, &ycsb) {
		t.Error(err)
	}
}
