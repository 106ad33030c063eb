package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/internal/ledger"
)

// TestUseStateDir: global.state_dir is created and handed to the ledger; an
// unusable one stops the start with its name; none says the ledger is in memory.
func TestUseStateDir(t *testing.T) {
	defer ledger.SetDir("")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if err := useStateDir("", logger); err != nil || ledger.Dir() != "" || !strings.Contains(logs.String(), "durability ledger kept in memory") {
		t.Fatalf("no state_dir: err %v dir %q log %q", err, ledger.Dir(), logs.String())
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := useStateDir(dir, logger); err != nil || ledger.Dir() != dir {
		t.Fatalf("state_dir %s: err %v dir %q", dir, err, ledger.Dir())
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := useStateDir(filepath.Join(file, "x"), logger)
	if err == nil || !strings.HasPrefix(err.Error(), "global.state_dir: ") {
		t.Fatalf("state_dir under a file: %v", err)
	}
}
