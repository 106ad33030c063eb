package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/generate"
)

type generateFlags struct {
	baseline  string
	rulesOut  string
	boardsOut string
	timeScale float64
	runbook   string
	warning   float64
	critical  float64
	slo       float64
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
	pf.StringVar(&f.baseline, "baseline", "baselines/james-reference.yaml", "Baseline data file (documented reference figures).")
	pf.Float64Var(&f.warning, "factor.warning", 0, "Override the baseline file's warning factor (0: keep the file's).")
	pf.Float64Var(&f.critical, "factor.critical", 0, "Override the baseline file's critical factor (0: keep the file's).")
	pf.Float64Var(&f.slo, "slo", 0, "Override policy.slo_objective, e.g. 0.999 (0: keep the file's).")
	pf.StringVar(&f.runbook, "runbook-url", generate.DefaultRunbookURL, "Runbook document the alerts link to (sections by alert name).")

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
			return writeFiles(f.rulesOut, files, stdout)
		},
	}
	rules.Flags().StringVar(&f.rulesOut, "out", "alerts", "Directory to write the rule file into (tests go to <out>/tests).")
	rules.Flags().Float64Var(&f.timeScale, "time-scale", 1, "Scale every for:, rate window and offset (tests only: 0.05 turns 5m into 15s). The shipped rules use 1.")

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
	if f.warning > 0 {
		b.Factors.Warning = f.warning
	}
	if f.critical > 0 {
		b.Factors.Critical = f.critical
	}
	if f.slo > 0 {
		b.Policy.SLOObjective = f.slo
	}
	if errs := b.Validate(); len(errs) > 0 {
		return nil, generate.Options{}, exitError{code: exitConfig, err: fmt.Errorf("%s with overrides: %w", f.baseline, errs)}
	}
	if f.timeScale <= 0 {
		f.timeScale = 1
	}
	return b, generate.Options{BaselineName: f.baseline, TimeScale: f.timeScale, RunbookURL: f.runbook}, nil
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
