// Command dbcanary runs continuous, verified canary workloads against the
// data stores its probes (probes/all) know and exports what it sees to Prometheus.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/all" // registers every backend
)

// DefaultListenAddress is outside the Prometheus exporter port allocations
// (9100-9999, fully allocated) and the usual service ports.
const DefaultListenAddress = ":19190"

type globalFlags struct {
	configFile string
	logLevel   string
	logFormat  string
}

// The process exit codes (the root command's help and docs/cli.md): a script tells a broken
// invocation or config from a store that failed its ops.
const (
	exitFailed  = 1 // once, bench or calibrate ran and ops failed (or the run was cut short); check-endpoint found an endpoint unhealthy
	exitUsage   = 2 // unknown command or flag, bad flag value, wrong arguments
	exitConfig  = 3 // the config (or baseline) file is unreadable or invalid
	exitRuntime = 4 // the daemon could not run: a port in use, an unwritable state_dir, a server error
)

// exitError carries a process exit code through cobra. A nil err means the
// command has already reported what went wrong.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// usageError marks err as a usage mistake (exit 2) found after flag parsing.
func usageError(err error) error { return exitError{code: exitUsage, err: err} }

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the CLI and returns the exit code (tests call it directly).
// Errors cobra finds before a command runs (unknown flag or command, bad
// arguments) are usage errors; an error a running command returns is a runtime
// error unless it says otherwise. The error is printed in --log.format.
func execute(args []string, stdout, stderr io.Writer) int {
	root, g := newRootCmd(stdout, stderr)
	started := false
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		started = true
		_, _, err := logFlags(g) // a bad --log.* value is a usage error for every command
		return err
	}
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	code := exitRuntime
	if !started {
		code = exitUsage
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err == nil {
			return ee.code
		}
		code = ee.code
	}
	reportFatal(g, stderr, err, code)
	return code
}

// reportFatal prints the error that ends the process: one log record in the
// chosen --log.format, or a plain line when the log flags themselves are bad.
func reportFatal(g *globalFlags, stderr io.Writer, err error, code int) {
	if logger, lerr := newLogger(g, stderr); lerr == nil && code != exitUsage {
		logger.Error("dbcanary exits", "err", err.Error(), "exit_code", code)
		return
	}
	fmt.Fprintln(stderr, "dbcanary:", err)
}

func newRootCmd(stdout, stderr io.Writer) (*cobra.Command, *globalFlags) {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "dbcanary",
		Short: "Continuous verified canaries for " + probes.Stores() + ", exported to Prometheus",
		Long: `dbcanary runs low-rate synthetic workloads against data stores on an open-loop
schedule, verifies that what it wrote reads back intact, and exports latency
histograms, failure causes and availability as Prometheus metrics.

Exit codes, for scripts and init systems:
  0  success
  1  ops failed (once, bench), a calibrate run was cut short, or
     check-endpoint found an endpoint unhealthy
  2  usage: unknown command or flag, a bad flag value, wrong arguments
  3  the config or baseline file is unreadable or invalid
  4  runtime: the daemon could not run (a listen address in use, an
     unwritable state_dir, the web server failing)
The error that ends the process is printed in --log.format.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.Version = version.Version
	root.SetVersionTemplate(version.Print("dbcanary") + "\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.configFile, "config.file", "dbcanary.yaml", "Configuration file.")
	pf.StringVar(&g.logLevel, "log.level", "info", "Log level: debug, info, warn, error.")
	pf.StringVar(&g.logFormat, "log.format", "logfmt", "Log format: logfmt or json.")

	root.AddCommand(
		newRunCmd(g, stderr),
		newCheckConfigCmd(g, stdout, stderr),
		newCheckEndpointCmd(stdout, stderr),
		newDumpConfigCmd(g, stdout, stderr),
		newOnceCmd(g, stdout, stderr),
		newGenerateCmd(stdout, stderr),
		newCalibrateCmd(g, stdout, stderr),
		newBenchCmd(g, stdout, stderr),
		&cobra.Command{
			Use:   "version",
			Short: "Print version information",
			Args:  cobra.NoArgs,
			Run: func(*cobra.Command, []string) {
				fmt.Fprintln(stdout, version.Print("dbcanary"))
			},
		},
	)
	return root, g
}

func newLogger(g *globalFlags, w io.Writer) (*slog.Logger, error) {
	lvl, fmtr, err := logFlags(g)
	if err != nil {
		return nil, err
	}
	logger := promslog.New(&promslog.Config{Level: lvl, Format: fmtr, Writer: w})
	// Libraries that log through the standard log package (net/http's
	// "Unsolicited response ...") then go through the same handler and format.
	slog.SetDefault(logger)
	return logger, nil
}

// logFlags parses --log.level and --log.format; a bad value is a usage error.
func logFlags(g *globalFlags) (*promslog.Level, *promslog.Format, error) {
	lvl := promslog.NewLevel()
	if err := lvl.Set(g.logLevel); err != nil {
		return nil, nil, usageError(fmt.Errorf("--log.level: %w", err))
	}
	fmtr := promslog.NewFormat()
	if err := fmtr.Set(g.logFormat); err != nil {
		return nil, nil, usageError(fmt.Errorf("--log.format: %w", err))
	}
	return lvl, fmtr, nil
}

// loadConfig loads the config file and prints every error, one per line (one
// log record each with --log.format=json); it fails with the config exit code.
func loadConfig(g *globalFlags, stderr io.Writer) (*config.Config, error) {
	file := g.configFile
	cfg, err := config.LoadFile(file)
	if err == nil {
		return cfg, nil
	}
	errs := []error{err}
	joined, isList := err.(interface{ Unwrap() []error }) // config.Parse joins every problem
	if isList {
		errs = joined.Unwrap()
	}
	if logger, lerr := newLogger(g, stderr); lerr == nil && g.logFormat == "json" {
		for _, e := range errs {
			logger.Error("invalid configuration", "file", file, "err", e.Error())
		}
	} else if !isList {
		fmt.Fprintf(stderr, "%s: %s\n", file, err)
	} else {
		fmt.Fprintf(stderr, "%s: %d error(s):\n", file, len(errs))
		for _, e := range errs {
			fmt.Fprintf(stderr, "  %s\n", e)
		}
	}
	return nil, exitError{code: exitConfig}
}

func newCheckConfigCmd(g *globalFlags, stdout, stderr io.Writer) *cobra.Command {
	var base string
	cmd := &cobra.Command{
		Use:   "check-config",
		Short: "Validate the config file and exit non-zero listing every error",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := loadConfig(g, stderr)
			if err != nil {
				return err
			}
			ops := 0
			for i, t := range cfg.Targets {
				ops += len(t.Resolved)
				for _, msg := range t.Warnings() {
					fmt.Fprintf(stderr, "%s: warning: targets[%d] (%s): %s\n", g.configFile, i, t.Name, msg)
				}
			}
			// Latency rules the op timeouts make unreachable (none compared
			// when the default baseline file is absent).
			if _, err := os.Stat(base); err == nil || base != defaultBaseline {
				msgs, err := thresholdWarnings(cfg, base)
				if err != nil {
					return exitError{code: exitConfig, err: err}
				}
				for _, msg := range msgs {
					fmt.Fprintf(stderr, "%s: warning: %s\n", g.configFile, msg)
				}
			}
			fmt.Fprintf(stdout, "%s: OK: %d target(s), %d op(s), instance id %q\n", g.configFile, len(cfg.Targets), ops, cfg.Global.InstanceID)
			fmt.Fprintln(stdout, "expected load on each store (payload at the configured rates):")
			printStoreLoad(stdout, cfg)
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "baseline", defaultBaseline, "Baseline file the alert rules are generated from: warn about latency thresholds at or above an op's timeout (none compared when the default file is absent).")
	return cmd
}

func newDumpConfigCmd(g *globalFlags, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "dump-config",
		Short: "Print the effective config with defaults filled in (holds no secret values)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := loadConfig(g, stderr)
			if err != nil {
				return err
			}
			out, err := config.Dump(cfg)
			if err != nil {
				return err
			}
			_, err = stdout.Write(out)
			return err
		},
	}
}
