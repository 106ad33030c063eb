package rabbitmq

import (
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestFacts: the rules and boards know exactly the ops of the default configuration.
func TestFacts(t *testing.T) {
	be, ok := probes.Lookup("rabbitmq")
	f, described := probes.FactsOf("rabbitmq")
	if !ok || !described {
		t.Fatal("rabbitmq is not registered and described")
	}
	for _, err := range probes.CheckFacts(f, be.NewConfig()) {
		t.Error(err)
	}
}
