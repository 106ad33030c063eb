package main

import (
	"strings"
	"testing"
)

// TestCheckConfigWarnsAboutWeakConsistency: a valid config whose Cassandra
// levels let reads miss writes (R + W <= RF) passes check-config with a
// warning on stderr; the defaults draw none.
func TestCheckConfigWarnsAboutWeakConsistency(t *testing.T) {
	const base = `
global: {instance_id: cli-test}
targets:
  - name: cass
    backend: cassandra
    ops: {insert: {rate: 1}, read: {rate: 1}}
    cassandra:
      hosts: [127.0.0.1]
      replication: {class: SimpleStrategy, replication_factor: 3}
`
	code, out, errOut := run(t, "check-config", "--config.file", writeConfig(t, t.TempDir(), base))
	if code != 0 || !strings.Contains(out, "OK") || strings.Contains(errOut, "warning") {
		t.Fatalf("defaults: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	weak := base + "      consistency: {insert: ONE, read: ONE}\n"
	code, out, errOut = run(t, "check-config", "--config.file", writeConfig(t, t.TempDir(), weak))
	if code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("weak levels are valid: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{"warning: targets[0] (cass): consistency: insert at ONE and read at ONE do not overlap with SimpleStrategy, replication factor 3 (R + W <= RF)", "cause stale"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}
