package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/generate"
)

type generateFlags struct {
	baseline  string
	merge     []string
	rulesOut  string
	boardsOut string
	runbook   string
	warning   float64
	critical  float64
	slo       float64
	aggregate []string
	timeouts  map[string]string
}

// newGenerateCmd is `dbcanary generate rules|dashboards`: alert rules, their
// promtool tests and Grafana boards derived from a baseline file.
func newGenerateCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &generateFlags{}
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate Prometheus rules or Grafana dashboards from a baseline file",
		Args:  cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.baseline, "baseline", defaultBaseline, "Baseline data file (documented reference figures).")
	pf.StringArrayVar(&f.merge, "merge", nil, "A calibrated baseline file (dbcanary calibrate --out) to merge into --baseline: its targets alert on their own figures, with its factors; every other target on --baseline's. Repeatable.")
	pf.Float64Var(&f.warning, "factor.warning", 0, "Override the baseline file's warning factor (0: keep the file's).")
	pf.Float64Var(&f.critical, "factor.critical", 0, "Override the baseline file's critical factor (0: keep the file's).")
	pf.Float64Var(&f.slo, "slo", 0, "Override policy.slo_objective, e.g. 0.999 (0: keep the file's).")
	pf.StringVar(&f.runbook, "runbook-url", generate.DefaultRunbookURL, "Runbook document the alerts link to (sections by alert name).")
	pf.StringSliceVar(&f.aggregate, "aggregate-by", nil, "Override policy.aggregate_by: labels every rule keeps besides target, backend, op (e.g. cluster,vantage; \"\" for none).")
	pf.StringToStringVar(&f.timeouts, "op-timeout", nil, "Override policy.op_timeouts: the timeout of an op (backend/op=30s) or of a backend's ops (backend=30s); latency thresholds at or above it get no rule.")

	rules := &cobra.Command{
		Use:   "rules",
		Short: "Write the rule file and its promtool unit tests (alerts/dbcanary-rules.yml, alerts/tests/)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b, opt, err := f.load()
			if err != nil {
				return err
			}
			files, err := generate.RuleFiles(b, opt)
			if err != nil {
				return err
			}
			skipped, err := generate.SkippedThresholds(b)
			if err != nil {
				return err
			}
			for _, t := range skipped {
				fmt.Fprintf(stderr, "%s: warning: %s\n", f.baseline, t.SkippedNote())
			}
			return writeFiles(f.rulesOut, files, stdout)
		},
	}
	rules.Flags().StringVar(&f.rulesOut, "out", "alerts", "Directory to write the rule file into (tests go to <out>/tests).")

	dashboards := &cobra.Command{
		Use:   "dashboards",
		Short: "Write the Grafana dashboards (dashboards/*.json)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b, opt, err := f.load()
			if err != nil {
				return err
			}
			files, err := generate.DashboardFiles(b, opt)
			if err != nil {
				return err
			}
			return writeFiles(f.boardsOut, files, stdout)
		},
	}
	dashboards.Flags().StringVar(&f.boardsOut, "out", "dashboards", "Directory to write the dashboards into.")
	cmd.AddCommand(rules, dashboards)
	cmd.SetErr(stderr)
	return cmd
}

func (f *generateFlags) load() (*baseline.File, generate.Options, error) {
	b, err := baseline.Load(f.baseline)
	if err != nil {
		return nil, generate.Options{}, exitError{code: exitConfig, err: err}
	}
	name := f.baseline
	for _, p := range f.merge {
		m, err := baseline.Load(p)
		if err == nil {
			err = b.Merge(m)
		}
		if err != nil {
			return nil, generate.Options{}, exitError{code: exitConfig, err: fmt.Errorf("--merge %s: %w", p, err)}
		}
		name += " --merge " + p
	}
	if f.warning > 0 {
		b.Factors.Warning = f.warning
	}
	if f.critical > 0 {
		b.Factors.Critical = f.critical
	}
	if f.slo > 0 {
		b.Policy.SLOObjective = f.slo
	}
	if f.aggregate != nil {
		b.Policy.AggregateBy = slices.DeleteFunc(f.aggregate, func(s string) bool { return s == "" })
	}
	for k, v := range f.timeouts {
		d, err := model.ParseDuration(v)
		if err != nil {
			return nil, generate.Options{}, exitError{code: exitUsage, err: fmt.Errorf("--op-timeout %s=%s: %w", k, v, err)}
		}
		if b.Policy.OpTimeouts == nil {
			b.Policy.OpTimeouts = map[string]model.Duration{}
		}
		b.Policy.OpTimeouts[k] = d
	}
	if err := b.Validate(); err != nil {
		return nil, generate.Options{}, exitError{code: exitConfig, err: fmt.Errorf("%s with overrides: %w", f.baseline, err)}
	}
	return b, generate.Options{BaselineName: name, RunbookURL: f.runbook}, nil
}

// writeFiles writes path → content under dir, creating directories.
func writeFiles(dir string, files map[string][]byte, stdout io.Writer) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data := files[name]
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", p)
	}
	return nil
}

// thresholdWarnings compares each op's timeout in the config with the
// latency thresholds of the rules generated from the baseline file: a
// threshold at or above the op's timeout can never be crossed (the op fails
// as a timeout first), and a threshold the rules left out for the timeout
// they assume could have a rule at this config's longer timeout.
func thresholdWarnings(cfg *config.Config, baselinePath string) ([]string, error) {
	b, err := baseline.Load(baselinePath)
	if err != nil {
		return nil, err
	}
	kept, err := generate.Thresholds(b)
	if err != nil {
		return nil, err
	}
	skipped, err := generate.SkippedThresholds(b)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, t := range cfg.Targets {
		for _, op := range t.Resolved {
			applies := func(th generate.Threshold) bool {
				return th.Backend == t.Backend && th.Op == op.Name && (th.Target == "" || th.Target == t.Name) && !slices.Contains(th.ExcludeTargets, t.Name)
			}
			where := fmt.Sprintf("targets[%d] (%s): op %s", i, t.Name, op.Name)
			for _, th := range kept {
				if applies(th) && th.Bound >= op.Timeout.Seconds() {
					out = append(out, fmt.Sprintf("%s: timeout %s is at or below the %s latency threshold %gs (%s, figure %s): that %s rule can never fire; give the op a timeout above %gs",
						where, op.Timeout, th.Severity, th.Bound, phaseOf(th), th.Figure.ID, generate.AlertLatencyAboveBaseline, th.Bound))
				}
			}
			for _, th := range skipped {
				if applies(th) && th.Bound < op.Timeout.Seconds() {
					out = append(out, fmt.Sprintf("%s: the rules from %s have no %s latency rule at %gs (%s, figure %s): they assume a %s timeout; with this config's %s, regenerate with --op-timeout %s/%s=%s to alert on it",
						where, baselinePath, th.Severity, th.Bound, phaseOf(th), th.Figure.ID, th.Timeout, op.Timeout, th.Backend, th.Op, model.Duration(op.Timeout)))
				}
			}
		}
	}
	return out, nil
}

func phaseOf(th generate.Threshold) string {
	s := "p" + strconv.FormatFloat(th.Quantile*100, 'f', -1, 64)
	if th.Phase != "" {
		s = th.Phase + " " + s
	}
	return s
}

// defaultBaseline is the shipped baseline file, relative to the repository.
const defaultBaseline = "baselines/james-reference.yaml"
