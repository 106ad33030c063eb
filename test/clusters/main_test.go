//go:build integration

package clusters

import (
	"fmt"
	"os"
	"testing"

	"github.com/dbcanary/dbcanary/test/stack"
)

// binary is dbcanary built from this tree; cassandra and rabbitmq the
// clusters' env (<store>-cluster.sh env), set by the tests that use them
// (useCluster), so that a test run with -run starts only its own cluster.
var (
	binary              string
	cassandra, rabbitmq stack.Env
)

func TestMain(m *testing.M) {
	if os.Getenv("DBCANARY_CLUSTERS") != "1" {
		fmt.Println("test/clusters: no test run: the cluster tests run with DBCANARY_CLUSTERS=1 (make test-compat-clusters), see docs/clusters.md")
		os.Exit(0)
	}
	var remove func()
	binary, remove = stack.MustBuild("dbcanary-clusters-")
	stack.Exit(m.Run(), remove)
}
