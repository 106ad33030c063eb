// Command dbcanary runs continuous, verified canary workloads against
// Cassandra, OpenSearch, RabbitMQ and S3 and exports what it sees to Prometheus.
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

// exitError carries a process exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the CLI and returns the exit code (tests call it directly).
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "dbcanary:", err)
		return 2
	}
	return 0
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "dbcanary",
		Short: "Continuous verified canaries for Cassandra, OpenSearch, RabbitMQ and S3, exported to Prometheus",
		Long: `dbcanary runs low-rate synthetic workloads against data stores on an open-loop
schedule, verifies that what it wrote reads back intact, and exports latency
histograms, failure causes and availability as Prometheus metrics.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.configFile, "config.file", "dbcanary.yaml", "Configuration file.")
	pf.StringVar(&g.logLevel, "log.level", "info", "Log level: debug, info, warn, error.")
	pf.StringVar(&g.logFormat, "log.format", "logfmt", "Log format: logfmt or json.")

	root.AddCommand(
		newRunCmd(g, stderr),
		newCheckConfigCmd(g, stdout, stderr),
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
	return root
}

func newLogger(g *globalFlags, w io.Writer) (*slog.Logger, error) {
	lvl := promslog.NewLevel()
	if err := lvl.Set(g.logLevel); err != nil {
		return nil, fmt.Errorf("--log.level: %w", err)
	}
	fmtr := promslog.NewFormat()
	if err := fmtr.Set(g.logFormat); err != nil {
		return nil, fmt.Errorf("--log.format: %w", err)
	}
	logger := promslog.New(&promslog.Config{Level: lvl, Format: fmtr, Writer: w})
	// Libraries that log through the standard log package (net/http's
	// "Unsolicited response ...") then go through the same handler and format.
	slog.SetDefault(logger)
	return logger, nil
}

// loadConfig loads the config file and prints every error, one per line.
func loadConfig(file string, stderr io.Writer) (*config.Config, error) {
	cfg, err := config.LoadFile(file)
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			fmt.Fprintf(stderr, "%s: %d error(s):\n", file, len(errs))
			for _, e := range errs {
				fmt.Fprintf(stderr, "  %s\n", e)
			}
		} else {
			fmt.Fprintf(stderr, "%s: %s\n", file, err)
		}
		return nil, exitError{1}
	}
	return cfg, nil
}

func newCheckConfigCmd(g *globalFlags, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "check-config",
		Short: "Validate the config file and exit non-zero listing every error",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := loadConfig(g.configFile, stderr)
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
			fmt.Fprintf(stdout, "%s: OK: %d target(s), %d op(s), instance id %q\n", g.configFile, len(cfg.Targets), ops, cfg.Global.InstanceID)
			return nil
		},
	}
}

func newDumpConfigCmd(g *globalFlags, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "dump-config",
		Short: "Print the effective config with defaults filled in (holds no secret values)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := loadConfig(g.configFile, stderr)
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
