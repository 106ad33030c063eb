//go:build integration

package clusters

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	dir, err := os.MkdirTemp("", "dbcanary-clusters-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "dbcanary")
	build := exec.Command("go", "build", "-o", binary, "./cmd/dbcanary")
	build.Dir = stack.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	stack.Cleanup()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
