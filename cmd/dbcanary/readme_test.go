package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeConfig runs check-config on the shortest config the README shows,
// so the first config a reader copies is one dbcanary accepts.
func TestReadmeConfig(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Point it at your own store")
	if !ok {
		t.Fatal(`README.md has no section "## Point it at your own store"`)
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md: no closed yaml block under \"Point it at your own store\"")
	}
	t.Setenv("DBCANARY_RABBITMQ_PASSWORD", "x")
	cfg := writeConfig(t, t.TempDir(), "global: {instance_id: readme}\n"+block)
	if code, out, errOut := run(t, "check-config", "--config.file", cfg); code != 0 {
		t.Fatalf("check-config on the README's config: exit %d\n%s\n%s", code, out, errOut)
	}
}
