//go:build integration

package s3

import (
	"os"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// TestSeaweedFSCollector runs the collector's tests on SeaweedFS's S3 gateway
// (test/stack/seaweedfs.sh): runs abandoned by a killed process are removed
// and stale multipart uploads aborted, as on MinIO and Swift. Every op, the
// ledger, auth and setup on SeaweedFS are test/compat's rows. SeaweedFS is
// built from its module source (~12 min cold), so this runs in make
// test-compat (DBCANARY_COMPAT=1), not in make test.
func TestSeaweedFSCollector(t *testing.T) {
	if os.Getenv("DBCANARY_COMPAT") != "1" {
		t.Skip("run by make test-compat-stores (DBCANARY_COMPAT=1): SeaweedFS is built there")
	}
	env, err := stack.Start("seaweedfs")
	if err != nil {
		t.Fatalf("starting SeaweedFS: %v", err)
	}
	st := s3Store{"seaweedfs", env}
	t.Run("collector", func(t *testing.T) {
		collectorRemovesAbandonedRuns(t, st, st.bucket(t, "dbcanary-it-seaweed-gc"), 10*time.Second)
	})
	t.Run("uploads", func(t *testing.T) { collectorAbortsStaleUploads(t, st, st.bucket(t, "dbcanary-it-seaweed-uploads")) })
}
