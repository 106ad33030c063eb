package opensearch

import (
	"testing"

	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/probetest"
)

// TestFacts: the rules and boards know exactly the ops of the default configuration.
func TestFacts(t *testing.T) {
	be, ok := probes.Lookup("opensearch")
	if !ok {
		t.Fatal("opensearch is not registered")
	}
	for _, err := range probetest.CheckFacts(be.Facts, be.NewConfig()) {
		t.Error(err)
	}
}
