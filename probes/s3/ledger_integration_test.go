//go:build integration

package s3

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

// testLedgers is the store this test binary opens its probes' durability
// ledgers from, as the daemon does for its targets (enginetest.OpenLedger).
var testLedgers = probes.NewLedgerStore("")

// ledgerCounts reads the ledger's checks of one target (probes.Store.CheckCounts).
func ledgerCounts(t *testing.T, target string) map[string]float64 {
	t.Helper()
	out, err := testLedgers.CheckCounts(target)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkUntilEmpty runs ledger_check until the ledger holds nothing, returning
// the data failures it reported.
func checkUntilEmpty(t *testing.T, p *Probe, within time.Duration) []error {
	t.Helper()
	var lost []error
	deadline := time.Now().Add(within)
	for len(p.Ledger().Entries()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ledger still holds %d entries after %s", len(p.Ledger().Entries()), within)
		}
		if _, err := run(t, p, probes.OpLedgerCheck, 20*time.Second); err != nil {
			if !probes.CauseOf(err).DataCause() {
				t.Fatalf("ledger_check: %v (cause %s)", err, probes.CauseOf(err))
			}
			lost = append(lost, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return lost
}

// TestLedgerSurvivesMinioKill9 is issue 12's S3 proof: objects MinIO
// acknowledged are all read back intact after MinIO is killed with SIGKILL
// and restarted, the one deleted behind the canary's back is reported
// missing (cause not_found, dbcanary_ledger_checks_total{result="missing"})
// and the one overwritten with other bytes corrupted.
func TestLedgerSurvivesMinioKill9(t *testing.T) {
	m := startPrivateMinio(t)
	b := "dbcanary-it-ledger"
	if err := m.client(t).MakeBucket(context.Background(), b, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	testLedgers.SetDir(stateDir)
	t.Cleanup(func() { testLedgers.SetDir("") })
	c := DefaultConfig
	c.Endpoint, c.Addressing, c.Bucket = "http://"+m.addr, "path", b
	c.AccessKeyIDFile, c.SecretAccessKeyFile = m.keyFile, m.secretFile
	c.Ledger.Ages = []time.Duration{10 * time.Second, 20 * time.Second}
	const target, writes = "ledger-kill9", 20
	p := newProbe(t, target, &c)
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	for range writes {
		mustRun(t, p, probes.OpLedgerWrite)
	}
	entries := p.Ledger().Entries()
	if len(entries) != writes {
		t.Fatalf("ledger holds %d entries after %d acknowledged writes", len(entries), writes)
	}

	start := time.Now()
	_ = m.cmd.Process.Kill() // SIGKILL: no shutdown, no flush
	<-m.exited
	m.start()
	t.Logf("MinIO killed with SIGKILL and restarted in %s", time.Since(start).Round(time.Millisecond))

	// Behind the canary's back: one object deleted, one overwritten with
	// other bytes of the same size.
	victim, altered := entries[writes/2].Key, entries[writes/4].Key
	if err := m.client(t).RemoveObject(context.Background(), b, victim, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	other := bytes.Repeat([]byte{'x'}, int(ledgerSize))
	if _, err := m.client(t).PutObject(context.Background(), b, altered, bytes.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := checkUntilEmpty(t, p, 90*time.Second)
	got := ledgerCounts(t, target)
	stack.Figure(t, "S3 ledger (MinIO kill -9, %d acknowledged PUTs, 1 deleted and 1 overwritten behind the canary's back): intact %v, missing %v, corrupted %v (10s: %v intact / %v missing / %v corrupted, 20s: %v intact)",
		writes, got["intact"], got["missing"], got["corrupted"], got["10s/intact"], got["10s/missing"], got["10s/corrupted"], got["20s/intact"])
	if got["missing"] != 1 || got["corrupted"] != 1 || got["10s/intact"] != writes-2 || got["20s/intact"] != writes-2 {
		t.Fatalf("checks %v: want exactly the deleted object missing, the overwritten one corrupted and every other intact at both ages", got)
	}
	var msgs []string
	causes := map[probes.Cause]bool{}
	for _, err := range lost {
		msgs = append(msgs, err.Error())
		causes[probes.CauseOf(err)] = true
	}
	all := strings.Join(msgs, "\n")
	// One ledger_check run names every loss it found; not_found wins its cause.
	if !causes[probes.CauseNotFound] || !strings.Contains(all, victim+" acknowledged") || !strings.Contains(all, "is missing at the 10s check") ||
		!strings.Contains(all, altered+" acknowledged") || !strings.Contains(all, "differs from what was written at the 10s check") {
		t.Fatalf("data failures %v: want %s missing (not_found) and %s differing", lost, victim, altered)
	}
	if len(lost) == 2 && !causes[probes.CauseMismatch] {
		t.Fatalf("data failures %v: the overwritten object's own run has cause %v, want mismatch", lost, causes)
	}
	// Checked at the last age, the objects are deleted; the corrupted one is
	// left as evidence (the collector removes it after abandoned_after).
	kept := false
	for _, k := range m.keys(t, b) {
		switch {
		case k == altered:
			kept = true
		case strings.Contains(k, "/"+ledgerDir):
			t.Errorf("ledger object %s left after its last check", k)
		}
	}
	if !kept {
		t.Errorf("the corrupted ledger object %s was deleted: it is the evidence", altered)
	}
	if err := closeProbe(p); err != nil {
		t.Fatal(err)
	}
}

// TestLedgerAcrossDbcanaryRestart: with the ledger file kept, entries written
// before a restart are checked after it; with the file removed (or corrupt),
// the new process knows nothing and reports no loss.
func TestLedgerAcrossDbcanaryRestart(t *testing.T) {
	b := bucket(t, "dbcanary-it-ledger-restart")
	stateDir := t.TempDir()
	testLedgers.SetDir(stateDir)
	t.Cleanup(func() { testLedgers.SetDir("") })
	c := minioConfig(t, b)
	c.Ledger.Ages = []time.Duration{10 * time.Second}
	const target = "ledger-restart"
	file := filepath.Join(stateDir, probes.LedgerFileName("it-1", target, "s3"))

	write := func(n int) {
		p := newProbe(t, target, c)
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		for range n {
			mustRun(t, p, probes.OpLedgerWrite)
		}
		if err := closeProbe(p); err != nil { // the daemon stops: its run prefix goes, the ledger's objects stay
			t.Fatal(err)
		}
	}

	// Kept: the next process checks what the previous one wrote.
	write(5)
	before := ledgerCounts(t, target)
	p := newProbe(t, target, c)
	if n := len(p.Ledger().Entries()); n != 5 {
		t.Fatalf("after a restart with the file kept the ledger holds %d entries, want 5", n)
	}
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	if lost := checkUntilEmpty(t, p, 60*time.Second); len(lost) != 0 {
		t.Fatalf("false losses after a restart: %v", lost)
	}
	kept := ledgerCounts(t, target)
	if kept["intact"]-before["intact"] != 5 || kept["missing"] != 0 {
		t.Fatalf("file kept: checks %v, want 5 intact", kept)
	}
	if err := closeProbe(p); err != nil {
		t.Fatal(err)
	}

	// Removed, then corrupt: a fresh ledger, zero false losses.
	for _, damage := range []string{"removed", "corrupt"} {
		write(3)
		if damage == "removed" {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := newProbe(t, target, c)
		if n := len(p.Ledger().Entries()); n != 0 {
			t.Fatalf("file %s: the ledger holds %d entries, want a fresh one", damage, n)
		}
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		mustRun(t, p, probes.OpLedgerWrite)
		time.Sleep(11 * time.Second)
		if lost := checkUntilEmpty(t, p, 60*time.Second); len(lost) != 0 {
			t.Fatalf("file %s: false losses %v", damage, lost)
		}
		if got := ledgerCounts(t, target); got["missing"] != 0 || got["corrupted"] != 0 {
			t.Fatalf("file %s: checks %v", damage, got)
		}
		stack.Figure(t, "S3 ledger, dbcanary restarted with the ledger file %s: 0 false losses (3 orphaned ledger objects are left to the collector and the lifecycle rule)", damage)
		if err := closeProbe(p); err != nil {
			t.Fatal(err)
		}
	}
	stack.Figure(t, "S3 ledger, dbcanary restarted with the ledger file kept: 5 of 5 entries written before the restart checked intact after it")
}
