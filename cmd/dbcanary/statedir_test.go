package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// TestUseStateDir: global.state_dir is created and handed to the ledger; an
// unusable one stops the start with its name; none says the ledger is in memory.
func TestUseStateDir(t *testing.T) {
	store := probes.NewLedgerStore("")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if err := useStateDir(store, "", logger); err != nil || store.Dir() != "" || !strings.Contains(logs.String(), "durability ledger kept in memory") {
		t.Fatalf("no state_dir: err %v dir %q log %q", err, store.Dir(), logs.String())
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := useStateDir(store, dir, logger); err != nil || store.Dir() != dir {
		t.Fatalf("state_dir %s: err %v dir %q", dir, err, store.Dir())
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := useStateDir(store, filepath.Join(file, "x"), logger)
	if err == nil || !strings.HasPrefix(err.Error(), "global.state_dir: ") {
		t.Fatalf("state_dir under a file: %v", err)
	}
}
