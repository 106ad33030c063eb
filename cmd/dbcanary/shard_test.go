package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/internal/shard"
)

func parseShardFlags(t *testing.T, args ...string) *shardFlags {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	sf := addShardFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return sf
}

func noopConfig(t *testing.T, n int) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("global: {instance_id: test}\ntargets:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: t%02d, backend: noop, labels: {team: a}, ops: {noop: {rate: 50}}}\n", i)
	}
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// clearShardEnv isolates a test from the environment it runs in (a CI pod named NAME-N would shard it).
func clearShardEnv(t *testing.T) {
	t.Setenv(shard.EnvIndex, "")
	t.Setenv(shard.EnvCount, "")
	t.Setenv(EnvVantage, "")
}

func TestShardApplySelectsOwnedTargets(t *testing.T) {
	clearShardEnv(t)
	cfg := noopConfig(t, 30)
	seen := map[string]int{}
	for i := range 3 {
		var logs bytes.Buffer
		got, err := parseShardFlags(t, "--shard.count=3", fmt.Sprintf("--shard.index=%d", i)).apply(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		want := shard.Select(cfg.Targets, i, 3)
		if len(got.Targets) != len(want) {
			t.Fatalf("index %d: %d targets, want %d", i, len(got.Targets), len(want))
		}
		for j, tg := range got.Targets {
			if tg.Name != want[j].Name {
				t.Fatalf("index %d: target %d is %s, want %s", i, j, tg.Name, want[j].Name)
			}
			seen[tg.Name]++
		}
		if !strings.Contains(logs.String(), fmt.Sprintf("shard_index=%d shard_count=3 index_from=--shard.index owned=%d configured=30", i, len(want))) {
			t.Errorf("log does not report the shard: %s", logs.String())
		}
	}
	if len(seen) != 30 {
		t.Errorf("%d of 30 targets are owned by some shard", len(seen))
	}
	if len(cfg.Targets) != 30 {
		t.Errorf("apply modified the input config: %d targets left", len(cfg.Targets))
	}
}

func TestShardApplyFromEnvironment(t *testing.T) {
	clearShardEnv(t)
	cfg := noopConfig(t, 20)
	t.Setenv(shard.EnvCount, "4")
	t.Setenv(shard.EnvIndex, "2")
	got, err := parseShardFlags(t).apply(cfg, discard())
	if err != nil {
		t.Fatal(err)
	}
	if want := shard.Select(cfg.Targets, 2, 4); len(got.Targets) != len(want) {
		t.Errorf("%d targets, want %d", len(got.Targets), len(want))
	}
	// Flags win over the environment.
	got, err = parseShardFlags(t, "--shard.count=1").apply(cfg, discard())
	if err != nil || got != cfg {
		t.Errorf("--shard.count=1 must return the config unchanged, got %v, %v", got, err)
	}
}

func TestShardApplyErrors(t *testing.T) {
	clearShardEnv(t)
	cfg := noopConfig(t, 2)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard.index=1"}, "--shard.index needs --shard.count (or $DBCANARY_SHARD_COUNT)"},
		{[]string{"--shard.count=3", "--shard.index=3"}, "shard index 3 is outside [0, 3) (index from --shard.index)"},
		{[]string{"--shard.count=-2"}, "--shard.count: must be at least 1, got -2"},
	} {
		_, err := parseShardFlags(t, tc.args...).apply(cfg, discard())
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestShardNoFlagsIsNoSharding(t *testing.T) {
	clearShardEnv(t)
	cfg := noopConfig(t, 5)
	got, err := parseShardFlags(t).apply(cfg, discard())
	if err != nil || got != cfg {
		t.Fatalf("got %v, %v; want the same config", got, err)
	}
}

// TestVantageLabelsEverySeries wires the wrapped registerer exactly as run.go
// does (metrics.NewWith and engine.New) and checks every gathered series.
func TestVantageLabelsEverySeries(t *testing.T) {
	clearShardEnv(t)
	reg := prometheus.NewRegistry()
	mreg, err := parseShardFlags(t, "--vantage=eu-west-1a").registerer(reg)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewWith(mreg, metrics.Options{})
	eng := engine.New(m, mreg, discard(), time.Second)
	if err := eng.Apply(noopConfig(t, 2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the noop ops run so op series have samples
	eng.Stop()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		for _, mm := range mf.GetMetric() {
			series++
			found := false
			for _, lp := range mm.GetLabel() {
				if lp.GetName() == "vantage" {
					found = lp.GetValue() == "eu-west-1a"
				}
			}
			if !found {
				t.Errorf("%s%v lacks vantage=\"eu-west-1a\"", mf.GetName(), mm.GetLabel())
			}
		}
	}
	for _, n := range []string{"dbcanary_op_latency_seconds", "dbcanary_target_info", "dbcanary_build_info", "dbcanary_targets", "go_goroutines"} {
		if !names[n] {
			t.Errorf("%s not gathered", n)
		}
	}
	if series < 20 {
		t.Errorf("only %d series gathered", series)
	}
}

func TestVantageFromEnvironmentAndValidation(t *testing.T) {
	clearShardEnv(t)
	reg := prometheus.NewRegistry()
	if got, err := parseShardFlags(t).registerer(reg); err != nil || got != prometheus.Registerer(reg) {
		t.Errorf("no vantage: got %v, %v; want the registry itself", got, err)
	}
	t.Setenv(EnvVantage, "us-central1-b")
	got, err := parseShardFlags(t).registerer(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
	got.MustRegister(g)
	mfs, _ := reg.Gather()
	if l := mfs[0].GetMetric()[0].GetLabel(); len(l) != 1 || l[0].GetName() != "vantage" || l[0].GetValue() != "us-central1-b" {
		t.Errorf("labels %v, want vantage=us-central1-b", l)
	}
	_, err = parseShardFlags(t, "--vantage=eu west").registerer(reg)
	if want := `--vantage: "eu west" must be 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
