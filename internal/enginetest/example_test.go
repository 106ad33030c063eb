package enginetest_test

import (
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	_ "github.com/dbcanary/dbcanary/probes/noop"
)

// TestPackageExample runs the package comment's example as written, so that
// it keeps matching the API.
func TestPackageExample(t *testing.T) {
	h := enginetest.Start(t, `targets: [{name: n1, backend: noop, ops: {noop: {rate: 50}}}]`)
	enginetest.WaitFor(t, 20*time.Second, "3 ops", func() bool {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "noop", "result": "ok"}) >= 3
	})
}
