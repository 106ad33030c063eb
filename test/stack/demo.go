package stack

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Demo is the demo config, deploy/local/dbcanary.yaml, decoded: the targets
// the suites run are its targets (same ops, rates, timeouts and options).
type Demo struct {
	Global  map[string]any   `yaml:"global"`
	Targets []map[string]any `yaml:"targets"`
}

// DemoConfig reads the demo config; every call returns a fresh copy.
func DemoConfig(t testing.TB) Demo {
	t.Helper()
	path := filepath.Join(RepoRoot(), "deploy", "local", "dbcanary.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var demo Demo
	if err := yaml.Unmarshal(raw, &demo); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if demo.Global == nil {
		demo.Global = map[string]any{}
	}
	return demo
}
