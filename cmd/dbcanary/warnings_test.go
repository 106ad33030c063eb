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

// TestCheckConfigWarnsAboutUnreachableLatencyRules: with the shipped
// baseline, an op whose timeout is at or below its latency threshold draws a
// warning (the rule can never fire), and an op whose longer timeout would
// allow a rule the shipped rules leave out says how to regenerate them.
func TestCheckConfigWarnsAboutUnreachableLatencyRules(t *testing.T) {
	const cfg = `
global: {instance_id: cli-test}
targets:
  - name: os
    backend: opensearch
    ops: {index: {rate: 1, timeout: 400ms}, get: {rate: 1}, bulk: {rate: 0.1, timeout: 60s}}
    opensearch: {addresses: [http://127.0.0.1:9]}
`
	base := "../../baselines/james-reference.yaml"
	code, out, errOut := run(t, "check-config", "--baseline", base, "--config.file", writeConfig(t, t.TempDir(), cfg))
	if code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{
		"warning: targets[0] (os): op index: timeout 400ms is at or below the warning latency threshold 0.4s (p99, figure jmap-p99-opensearch): that DbcanaryLatencyAboveBaseline rule can never fire; give the op a timeout above 0.4s",
		"warning: targets[0] (os): op bulk: the rules from " + base + " have no warning latency rule at 12s (p99, figure os-bulk-p99): they assume a 5s timeout; with this config's 1m0s, regenerate with --op-timeout opensearch/bulk=1m to alert on it",
		"op bulk: the rules from " + base + " have no critical latency rule at 35s",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// get keeps the default 5s timeout, far above its thresholds (0.4s, 1.2s);
	// index's critical threshold (1.2s) is above its 400ms timeout too.
	if strings.Contains(errOut, "op get") || strings.Count(errOut, "op index") != 2 {
		t.Errorf("unexpected warnings:\n%s", errOut)
	}
	// The default baseline path is relative to the repository: absent here, nothing is compared.
	if _, _, errOut := run(t, "check-config", "--config.file", writeConfig(t, t.TempDir(), cfg)); strings.Contains(errOut, "latency") {
		t.Errorf("no baseline file, yet: %s", errOut)
	}
}
