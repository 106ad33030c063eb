package s3

import (
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestFacts: the rules and boards know exactly the ops of the default configuration.
func TestFacts(t *testing.T) {
	be, ok := probes.Lookup("s3")
	f, described := probes.FactsOf("s3")
	if !ok || !described {
		t.Fatal("s3 is not registered and described")
	}
	for _, err := range probes.CheckFacts(f, be.NewConfig()) {
		t.Error(err)
	}
}
