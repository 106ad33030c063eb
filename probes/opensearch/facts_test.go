package opensearch

import (
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestFacts: the rules and boards know exactly the ops of the default configuration.
func TestFacts(t *testing.T) {
	be, ok := probes.Lookup("opensearch")
	f, described := probes.FactsOf("opensearch")
	if !ok || !described {
		t.Fatal("opensearch is not registered and described")
	}
	for _, err := range probes.CheckFacts(f, be.NewConfig()) {
		t.Error(err)
	}
}
