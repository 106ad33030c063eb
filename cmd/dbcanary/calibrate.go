package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/calibrate"
	"github.com/dbcanary/dbcanary/internal/engine"
)

type calibrateFlags struct {
	duration   time.Duration
	out        string
	base       string
	warning    float64
	critical   float64
	conditions string
	grace      time.Duration
}

// newCalibrateCmd is `dbcanary calibrate`: the config at its own rates for a
// while, written as a baseline file of this store's own figures.
func newCalibrateCmd(g *globalFlags, stdout, stderr io.Writer) *cobra.Command {
	f := &calibrateFlags{}
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Measure every target at the config's own rates for a while and write a baseline file of its p50/p90/p99 per target and op",
		Long: `calibrate runs the config's targets at their normal canary rates (in a
namespace of its own, removed at the end: a daemon running beside it is not
disturbed) for --duration, then writes a baseline file (baselines/ format)
holding each target's own p50, p90 and p99 per op, the sample counts and the
conditions. Generate alerts from it with
  dbcanary generate rules --baseline FILE
Its thresholds are per target: p99 x factor.warning warns, x factor.critical pages.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCalibrate(cmd, g, f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.duration, "duration", 10*time.Minute, "How long to measure. A p99 is alerted on only with at least 100 samples of the op (at 1 op/s, over 100 s).")
	fl.StringVar(&f.out, "out", "baselines/calibrated.yaml", "Baseline file to write (- for stdout).")
	fl.StringVar(&f.base, "baseline", "baselines/james-reference.yaml", "Baseline file whose policy (SLO, windows, job name) the written file keeps; the built-in defaults when the default file is absent.")
	fl.Float64Var(&f.warning, "factor.warning", calibrate.DefaultWarning, "Warning threshold = measured p99 x this.")
	fl.Float64Var(&f.critical, "factor.critical", calibrate.DefaultCritical, "Critical threshold = measured p99 x this.")
	fl.StringVar(&f.conditions, "conditions", "", "Free text recorded with the figures: store versions, hardware, load at the time.")
	fl.DurationVar(&f.grace, "shutdown.grace-period", 10*time.Second, "How long in-flight ops may run at the end before they are cancelled.")
	return cmd
}

func runCalibrate(cmd *cobra.Command, g *globalFlags, f *calibrateFlags, stdout, stderr io.Writer) error {
	logger, err := newLogger(g, stderr)
	if err != nil {
		return err
	}
	if f.duration <= 0 {
		return errors.New("--duration must be positive")
	}
	cfg, err := loadConfig(g, stderr)
	if err != nil {
		return err
	}
	var base *baseline.File
	if b, err := baseline.Load(f.base); err == nil {
		base = b
	} else if cmd.Flags().Changed("baseline") || !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--baseline: %w", err)
	}
	opt := calibrate.Options{Base: base, Warning: f.warning, Critical: f.critical}
	if f.warning < 1 || f.critical <= f.warning {
		return fmt.Errorf("--factor.warning must be at least 1 and --factor.critical above it, got %g and %g", f.warning, f.critical)
	}

	ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	instance := engine.EphemeralInstanceID(cfg.Global.InstanceID, "calibrate")
	fmt.Fprintf(stderr, "calibrate: %d target(s) at their configured rates for %s; instance id %s (a namespace of its own, removed at the end)\n",
		len(cfg.Targets), f.duration, instance)
	host, _ := os.Hostname()
	ver := version.Version
	if ver == "" {
		ver = "(development build)"
	}
	cond := calibrate.Conditions{Started: time.Now(), Duration: f.duration, Config: cfg, Version: ver, Host: host, Notes: f.conditions}
	rec := calibrate.NewRecorder(cfg)
	done := make(chan struct{})
	go calibrateProgress(stderr, rec, cond.Started, f.duration, done)
	err = engine.RunScheduled(ctx, cfg, instance, f.duration, f.grace, logger, rec.Record)
	close(done)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "calibrate: interrupted after %s: nothing written (a baseline needs the whole run)\n", clock(time.Since(cond.Started)))
		return exitError{code: exitFailed}
	}
	b, warnings, err := rec.Build(cond, opt)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "calibrate: warning:", w)
	}
	if err != nil {
		return err
	}
	data, err := calibrate.Marshal(b, cond, g.configFile)
	if err != nil {
		return err
	}
	return writeCalibration(b, data, f.out, stdout, stderr)
}

// calibrateProgress draws the run's progress line on stderr until done is closed.
func calibrateProgress(stderr io.Writer, rec *calibrate.Recorder, started time.Time, duration time.Duration, done <-chan struct{}) {
	p := newProgress(stderr, duration)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	show := func(force bool) {
		n, bad := rec.Progress()
		el := min(time.Since(started), duration)
		p.update(fmt.Sprintf("calibrate %s / %s  samples %d  failures %d", clock(el), clock(duration), n, bad), force)
	}
	show(true)
	for {
		select {
		case <-done:
			show(true)
			p.done()
			return
		case <-t.C:
			show(false)
		}
	}
}

// writeCalibration prints the figures as a table on stderr and writes data to
// out ("-": stdout).
func writeCalibration(b *baseline.File, data []byte, out string, stdout, stderr io.Writer) error {
	tw := tabwriter.NewWriter(stderr, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tOP\tPHASE\tSTAT\tVALUE\tSAMPLES\tUSE")
	for _, fig := range b.Figures {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%g %s\t%d\t%s\n", fig.Targets[0], fig.Ops[0], fig.Phase, fig.Stat, fig.Value, fig.Unit, fig.Samples, fig.Use)
	}
	_ = tw.Flush()
	if out == "-" {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: regenerate the alerts with `dbcanary generate rules --baseline %s`\n", out, out)
	return nil
}

func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
