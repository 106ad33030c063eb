//go:build soakchaos

// Package chaos is `make soak-chaos`: dbcanary against the reference
// topology as far as one machine holds it (3-node Cassandra, 3-node
// RabbitMQ with a quorum queue, 3-node OpenSearch with a replica, MinIO, the
// demo's noop target), the shipped rules and Alertmanager config, and a
// nemesis injecting faults drawn from a catalogue at random times for
// CHAOS_DURATION; the run's history is judged by test/chaos/history. See
// docs/page-quality.md#make-soak-chaos.
package chaos

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

var binary string // dbcanary built from this tree

func TestMain(m *testing.M) {
	t0 := time.Now()
	var remove func()
	binary, remove = stack.MustBuild("dbcanary-chaos-bin-", "-trimpath")
	fmt.Fprintf(os.Stderr, "chaos: built %s in %s\n", binary, time.Since(t0).Round(time.Second))
	stack.Exit(m.Run(), remove)
}
