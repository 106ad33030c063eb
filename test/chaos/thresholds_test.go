//go:build soakchaos

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/generate"
	"github.com/dbcanary/dbcanary/test/stack"
)

// The run's thresholds. By default the shipped rules (alerts/, from
// baselines/james-reference.yaml: a loaded benchmark's figures on someone
// else's hardware). An operator whose store is slower at rest than those
// figures calibrates it and alerts on its own figures (docs/bench-calibrate.md):
// the run does the same with
//   - CHAOS_BASELINE=FILE: a calibrated file merged into the reference one
//     (dbcanary generate rules --merge FILE), or
//   - CHAOS_CALIBRATE=20m: dbcanary calibrate of the targets named in
//     CHAOS_CALIBRATE_TARGETS (default cas) on the run's own servers, beside
//     the started daemon, after CHAOS_CALIBRATE_WARMUP (15m) of it and before
//     Prometheus starts; written to the run's calibrated.yaml, then merged.
//
// Windows, for:, the Alertmanager config and every other target's
// thresholds stay as shipped.
type thresholds struct {
	b     *baseline.File
	rules []byte
	// what names the rules in the log and the table.
	what string
}

// runThresholds chooses the run's thresholds (see thresholds).
func runThresholds(t *testing.T, d *daemon) thresholds {
	b, rules := shippedRules(t)
	file := os.Getenv("CHAOS_BASELINE")
	if v := os.Getenv("CHAOS_CALIBRATE"); v != "" {
		dur, err := time.ParseDuration(v)
		if err != nil || dur < 2*time.Minute {
			t.Fatalf("CHAOS_CALIBRATE=%q: want a duration of at least 2m (a p99 needs 100 samples), such as 20m", v)
		}
		warm := 15 * time.Minute
		if w := os.Getenv("CHAOS_CALIBRATE_WARMUP"); w != "" {
			if warm, err = time.ParseDuration(w); err != nil {
				t.Fatalf("CHAOS_CALIBRATE_WARMUP=%q: want a duration such as 15m", w)
			}
		}
		// A measurement window, not a wait for a condition: calibrated from the
		// stack's start, the figures are its JVMs' first minutes (6 Dec 23:48:
		// cas read p99 128 ms, against 10.9 ms warm).
		logf("the daemon warms the stack for %s before calibrating (CHAOS_CALIBRATE_WARMUP)", warm)
		time.Sleep(warm)
		file = calibrate(t, d, dur, calibrateTargets())
	}
	if file == "" {
		return thresholds{b: b, rules: rules, what: "shipped (alerts/dbcanary-rules.yml from baselines/james-reference.yaml)"}
	}
	cal, err := baseline.Load(file)
	if err == nil {
		err = b.Merge(cal)
	}
	if err != nil {
		t.Fatalf("CHAOS_BASELINE %s: %v", file, err)
	}
	name := "baselines/james-reference.yaml --merge " + file
	files, err := generate.RuleFiles(b, generate.Options{BaselineName: name})
	if err != nil {
		t.Fatalf("rules from %s: %v", name, err)
	}
	var own []string
	for _, f := range cal.Figures {
		if f.Use == baseline.UseAlert {
			for _, op := range f.Ops {
				own = append(own, fmt.Sprintf("%s %s%s %s %g %s", strings.Join(f.Targets, ","), op, phaseOf(f), f.Stat, f.Value, f.Unit))
			}
		}
	}
	return thresholds{b: b, rules: files["dbcanary-rules.yml"],
		what: fmt.Sprintf("shipped, but these targets' latency thresholds from their own calibrated figures (%s, factors %g/%g): %s",
			file, cal.Factors.Warning, cal.Factors.Critical, strings.Join(own, "; "))}
}

func phaseOf(f baseline.Figure) string {
	if f.Phase == "" {
		return ""
	}
	return "/" + f.Phase
}

// calibrateTargets are CHAOS_CALIBRATE_TARGETS's names (default cas: the one
// store whose shipped warning ticketed with no fault, on 6 Dec's machine;
// docs/evidence/soak-chaos.md).
func calibrateTargets() []string {
	v := os.Getenv("CHAOS_CALIBRATE_TARGETS")
	if v == "" {
		return []string{targetCas}
	}
	return strings.Split(v, ",")
}

// calibrate runs `dbcanary calibrate` for dur on the named targets of the
// run's config and returns the file it wrote.
func calibrate(t *testing.T, d *daemon, dur time.Duration, names []string) string {
	var cfg map[string]any
	if err := yaml.Unmarshal(d.render(), &cfg); err != nil {
		t.Fatal(err)
	}
	all, _ := cfg["targets"].([]any)
	var keep []any
	for _, tg := range all {
		if m, ok := tg.(map[string]any); ok && slices.Contains(names, fmt.Sprint(m["name"])) {
			keep = append(keep, tg)
		}
	}
	if len(keep) != len(names) {
		t.Fatalf("CHAOS_CALIBRATE_TARGETS=%s: the run's targets are cas, mq, os, s3, swift, mq-lossy and the demo's noop", strings.Join(names, ","))
	}
	cfg["targets"] = keep
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath, file := filepath.Join(d.dir, "calibrate.yaml"), filepath.Join(d.dir, "calibrated.yaml")
	if err := os.WriteFile(cfgPath, out, 0o600); err != nil {
		t.Fatal(err)
	}
	conditions := fmt.Sprintf("make soak-chaos's stack (test/chaos): Cassandra 5.0.9 x3 RF 3 LOCAL_QUORUM, 1 GiB heaps, beside the run's daemon, 3-node RabbitMQ and OpenSearch, MinIO and Swift on one 2-core host; load average at the start %.2f", stack.LoadAverage())
	logf("calibrating %s for %s beside the daemon (%s)", strings.Join(names, ","), dur, file)
	t0 := time.Now()
	cmd := exec.Command(binary, "calibrate", "--config.file", cfgPath, "--duration", dur.String(), "--out", file,
		"--baseline", filepath.Join(stack.RepoRoot(), "baselines", "james-reference.yaml"), "--conditions", conditions)
	log, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(d.dir, "calibrate.log"), log, 0o644)
	if err != nil {
		t.Fatalf("dbcanary calibrate: %v (log in %s)", err, filepath.Join(d.dir, "calibrate.log"))
	}
	logf("calibrated in %s; load average %.2f", time.Since(t0).Round(time.Second), stack.LoadAverage())
	return file
}
