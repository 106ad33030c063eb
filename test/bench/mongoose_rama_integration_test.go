//go:build integration

package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bench "github.com/dbcanary/dbcanary/internal/bench"
)

// TestMongooseRamaProfiles runs the Mongoose (s3-bandwidth, s3-recycle,
// cassandra-recycle) and Rama (cassandra-maxwrite, cassandra-readwrite)
// profiles at a small shape, each stage bounded by an op count, and checks
// the report's fields: its reference source, dbcanary's peak RSS, every op
// of every stage done and verified, the bytes moved, and the notes that say
// what the figures depend on. Timings are printed, never asserted.
func TestMongooseRamaProfiles(t *testing.T) {
	cfg := stackConfig(t)
	const mib = 1 << 20
	for _, tc := range []struct {
		profile   string
		args      []string
		reference string
		stages    []string // name: ops expected (setup stages included)
		ops       []uint64
		check     func(t *testing.T, r *bench.Report, out string)
	}{
		{"s3-bandwidth", []string{"--param", "size=32MiB", "--param", "concurrency=4", "--ops", "8"},
			"1.2.2 Bandwidth", []string{"create", "read"}, []uint64{8, 8},
			func(t *testing.T, r *bench.Report, out string) {
				if got := r.Stages[1].Ops[0].BytesReceived; got != 8*32*mib {
					t.Errorf("read %d bytes back, want 8 x 32 MiB", got)
				}
				// 4 ops in flight on 32 MiB objects: a body held whole would
				// take 128 MiB at least; streamed, the process stays far below.
				if r.PeakRSSBytes <= 0 || r.PeakRSSBytes > 96*mib {
					t.Errorf("peak RSS %d bytes: want > 0 and under 96 MiB (objects streamed)", r.PeakRSSBytes)
				}
				mustContain(t, out, "MiB/s", "Objects are streamed")
			}},
		// 300 objects: more than the probe deletes one by one at the end.
		{"s3-recycle", []string{"--param", "items=300", "--param", "size=4KiB", "--ops", "600", "--warmup", "0s"},
			"1.2.4 Recycle Mode", []string{"prepare", "recycle"}, []uint64{300, 600},
			func(t *testing.T, r *bench.Report, _ string) {
				// 600 reads in order round 300 objects: each read twice.
				if got := r.Stages[1].Ops[0].BytesReceived; got != 600*4096 {
					t.Errorf("recycle read %d bytes, want 600 x 4 KiB", got)
				}
			}},
		{"cassandra-recycle", []string{"--param", "items=100", "--ops", "300", "--warmup", "0s"},
			"1.2.4 Recycle Mode", []string{"prepare", "recycle"}, []uint64{100, 300},
			func(t *testing.T, r *bench.Report, _ string) {
				if r.Stages[1].Ops[0].BytesReceived == 0 {
					t.Error("recycle read nothing back")
				}
			}},
		{"cassandra-maxwrite", []string{"--param", "batch=20", "--param", "in-flight=100", "--ops", "30", "--warmup", "0s"},
			"Max write throughput", []string{"write"}, []uint64{30},
			func(t *testing.T, r *bench.Report, out string) {
				mustContain(t, out, "writes/s", "5 workers each keep one batch of 20 rows in flight (100 writes)",
					"commitlog_sync of the node that answered: periodic", "batch/periodic is about 0.4")
			}},
		{"cassandra-readwrite", []string{"--param", "rows=400", "--param", "in-flight=10", "--ops", "200", "--warmup", "0s"},
			"Mixed read/write", []string{"load", "mixed"}, []uint64{400, 200},
			func(t *testing.T, r *bench.Report, out string) {
				mustContain(t, out, "commitlog_sync of the node that answered: periodic", "Every read was verified")
			}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			js := filepath.Join(artefacts, tc.profile+".json")
			args := append([]string{"bench", "--config.file", cfg, "--profile", tc.profile, "--json", js}, tc.args...)
			t0 := time.Now()
			code, out, errOut := run(t, 5*time.Minute, args...)
			t.Logf("%s: %s", tc.profile, time.Since(t0).Round(100*time.Millisecond))
			_ = os.WriteFile(filepath.Join(artefacts, tc.profile+".txt"), []byte(out), 0o644)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			data, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			var r bench.Report
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.Reproduces, tc.reference) || r.PeakRSSBytes <= 0 || r.Failed != 0 {
				t.Fatalf("report: reproduces %q (want %q in it), peak RSS %d, %d failed", r.Reproduces, tc.reference, r.PeakRSSBytes, r.Failed)
			}
			mustContain(t, out, "Reproduces: ", "Peak RSS of dbcanary: ")
			for _, n := range r.Notes {
				if strings.HasPrefix(n, "cleanup") || strings.HasPrefix(n, "interrupted") {
					t.Errorf("note: %s", n)
				}
			}
			if len(r.Stages) != len(tc.stages) {
				t.Fatalf("%d stages, want %v", len(r.Stages), tc.stages)
			}
			for i, s := range r.Stages {
				var ok, failed uint64
				for _, o := range s.Ops {
					ok, failed = ok+o.OK, failed+o.Failed
				}
				if s.Name != tc.stages[i] || ok != tc.ops[i] || failed != 0 {
					t.Errorf("stage %d: %s with %d ok, %d failed; want %s with %d ok", i, s.Name, ok, failed, tc.stages[i], tc.ops[i])
				}
			}
			tc.check(t, &r, out)
		})
	}
}

func mustContain(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
}
