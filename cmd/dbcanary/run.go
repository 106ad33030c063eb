package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/engine"
	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/internal/shard"
	"github.com/dbcanary/dbcanary/internal/status"
	"github.com/dbcanary/dbcanary/internal/web"
	"github.com/dbcanary/dbcanary/probes"
)

type runFlags struct {
	listen      []string
	webConfig   string
	metricsPath string
	grace       time.Duration
	histograms  string
	// histogramsSet: --metrics.histograms was given, and wins over the config.
	histogramsSet bool
	shard         *shardFlags
}

func newRunCmd(g *globalFlags, stderr io.Writer) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the canary daemon and serve metrics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.histogramsSet = cmd.Flags().Changed("metrics.histograms")
			return runDaemon(cmd.Context(), g, f, stderr)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register defines every flag of `dbcanary run`, the --shard.* and --vantage ones too.
func (f *runFlags) register(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.listen, "web.listen-address", []string{DefaultListenAddress}, "Addresses to listen on for the web interface and metrics (repeatable).")
	fl.StringVar(&f.webConfig, "web.config.file", "", "Path to a web configuration file enabling TLS or basic auth (exporter-toolkit format).")
	fl.StringVar(&f.metricsPath, "web.telemetry-path", "/metrics", "Path under which to expose metrics.")
	fl.DurationVar(&f.grace, "shutdown.grace-period", 10*time.Second, "How long in-flight ops may run on shutdown or target removal before they are cancelled.")
	fl.StringVar(&f.histograms, "metrics.histograms", "", "Classic histogram buckets: compact (the bounds alerts and boards read; docs/sizing.md) or full (every op histogram with every bound, as before the series budget). When given, it wins over the config's global.metrics.histograms; when not, that key decides (default compact). A reload cannot change the layout: restart.")
	f.shard = addShardFlags(fl)
}

// addShardFlags defines --shard.index, --shard.count and --vantage.
func addShardFlags(fs *pflag.FlagSet) *shardFlags {
	s := &shardFlags{}
	fs.IntVar(&s.index, "shard.index", -1, "This replica's shard, 0 to shard.count-1 (default: $"+shard.EnvIndex+", else the StatefulSet ordinal N of the host name NAME-N).")
	fs.IntVar(&s.count, "shard.count", 0, "Replicas sharing the targets by rendezvous hashing of target names; each target is probed by exactly one (default: $"+shard.EnvCount+", else 1: no sharding).")
	fs.StringVar(&s.vantage, "vantage", "", "Name of the place this replica probes from (a zone): adds vantage=\"NAME\" to every dbcanary series, for several replicas probing every target (default: $"+EnvVantage+").")
	return s
}

// daemon is what `dbcanary run` keeps between start, reloads and shutdown.
type daemon struct {
	g      *globalFlags
	f      *runFlags
	logger *slog.Logger
	hist   metrics.Histograms // fixed at start: a reload cannot change it
	reg    *prometheus.Registry
	m      *metrics.Metrics
	eng    *engine.Engine
	st     *status.Store
	// reloadMu serialises reloads from SIGHUP and POST /-/reload.
	reloadMu sync.Mutex
}

func runDaemon(ctx context.Context, g *globalFlags, f *runFlags, stderr io.Writer) error {
	logger, err := newLogger(g, stderr)
	if err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	cfg, err := loadConfig(g, stderr)
	if err != nil {
		return err
	}
	if cfg, err = f.shard.apply(cfg, logger); err != nil {
		return usageError(err)
	}
	d, err := newDaemon(g, f, cfg, logger)
	if err != nil {
		return err
	}
	var ready atomic.Bool
	ready.Store(true)
	h, err := web.Handler(web.Options{Registry: d.reg, MetricsPath: f.metricsPath, Version: version.Version,
		Reload: d.reload, Ready: ready.Load, Logger: logger, Status: d.st})
	if err != nil {
		return err
	}
	return d.serve(ctx, h)
}

// validate checks the flags that need no config: the histogram layout and the web config file.
func (f *runFlags) validate() error {
	if _, err := metrics.ParseHistograms(f.histograms); err != nil {
		return usageError(fmt.Errorf("--metrics.histograms: %w", err))
	}
	if f.webConfig != "" {
		if err := toolkit.Validate(f.webConfig); err != nil {
			return exitError{code: exitConfig, err: fmt.Errorf("--web.config.file: %w", err)}
		}
	}
	return nil
}

// newDaemon registers the metrics, builds the engine and the status page,
// and starts cfg's targets.
func newDaemon(g *globalFlags, f *runFlags, cfg *config.Config, logger *slog.Logger) (*daemon, error) {
	d := &daemon{g: g, f: f, logger: logger, hist: f.histogramLayout(cfg, logger), reg: prometheus.NewRegistry()}
	logger.Info("starting dbcanary", "version", version.Info(), "config", g.configFile, "instance_id", cfg.Global.InstanceID, "targets", len(cfg.Targets), "histograms", d.hist.String())
	logWarnings(cfg, logger)
	// In vantage mode every dbcanary series carries vantage="<zone>".
	mreg, err := f.shard.registerer(d.reg)
	if err != nil {
		return nil, usageError(err)
	}
	d.m = metrics.NewWith(mreg, metrics.Options{Histograms: d.hist})
	d.eng = engine.New(d.m, mreg, logger, f.grace)
	if err := useStateDir(d.eng.Ledgers(), cfg.Global.StateDir, logger); err != nil {
		return nil, err
	}
	// The status page (/) sees every sample through its own bounded store.
	d.st = status.New(status.Options{Ledgers: d.eng.Ledgers()})
	d.st.SetDaemon(status.Daemon{Build: buildInfo(), InstanceID: cfg.Global.InstanceID, ConfigFile: g.configFile, Shard: f.shard.statusShard()})
	d.eng.SetObserver(d.st)
	if err := d.eng.Apply(cfg); err != nil {
		return nil, fmt.Errorf("starting targets: %w", err)
	}
	d.st.ConfigLoaded(nil)
	d.m.ReloadSuccess.Set(1)
	d.m.ReloadTimestamp.SetToCurrentTime()
	return d, nil
}

// reload reads the config file again and applies it whole, or keeps the
// running config and says so (the reload gauge, the status page, the log).
func (d *daemon) reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg, err := config.LoadFile(d.g.configFile)
	if err == nil {
		cfg, err = d.f.shard.apply(cfg, d.logger)
	}
	if err == nil {
		// Refused rather than half-applied: the reload gauge then says
		// the file is not what runs, and a restart applies it whole.
		if h := d.f.histogramLayout(cfg, d.logger); h != d.hist {
			err = fmt.Errorf("global.metrics.histograms: the config asks for %s, the daemon runs %s: the layout cannot change on reload (every op histogram would be re-created); restart dbcanary to apply it", h, d.hist)
		}
	}
	if err == nil {
		err = d.eng.Apply(cfg)
	}
	d.st.ConfigLoaded(err)
	if err != nil {
		d.m.ReloadSuccess.Set(0)
		d.logger.Error("config reload failed; the previous config keeps running", "err", err)
		return err
	}
	d.st.SetInstanceID(cfg.Global.InstanceID)
	d.m.ReloadSuccess.Set(1)
	d.m.ReloadTimestamp.SetToCurrentTime()
	d.logger.Info("config reloaded", "targets", len(cfg.Targets))
	logWarnings(cfg, d.logger)
	return nil
}

// serve serves h until a signal, ctx or a server error ends it, reloading on
// SIGHUP, then stops the engine and the server.
func (d *daemon) serve(ctx context.Context, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	systemd := false
	flags := &toolkit.FlagConfig{WebListenAddresses: &d.f.listen, WebSystemdSocket: &systemd, WebConfigFile: &d.f.webConfig}
	srvErr := make(chan error, 1)
	go func() { srvErr <- web.Serve(srv, flags, d.logger) }()

	if ctx == nil {
		ctx = context.Background()
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				_ = d.reload()
				continue
			}
			d.logger.Info("shutting down", "signal", s.String())
		case err := <-srvErr:
			d.eng.Stop()
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("web server: %w", err)
		case <-ctx.Done():
			d.logger.Info("shutting down")
		}
		break
	}
	d.eng.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// histogramLayout is the layout the daemon runs with cfg: the flag's when
// given (logging when it overrides another value set in the file), else the
// config's global.metrics.histograms, else compact. Both were validated already.
func (f *runFlags) histogramLayout(cfg *config.Config, logger *slog.Logger) metrics.Histograms {
	set := cfg.Global.Metrics.Histograms
	file, _ := metrics.ParseHistograms(string(set.Effective()))
	if !f.histogramsSet {
		return file
	}
	flag, _ := metrics.ParseHistograms(f.histograms)
	if set != "" && flag != file {
		logger.Warn("--metrics.histograms overrides the config's global.metrics.histograms", "flag", flag.String(), "config", file.String())
	}
	return flag
}

// buildInfo is the binary's version for the status page.
func buildInfo() status.BuildInfo {
	return status.BuildInfo{Version: version.Version, Revision: version.Revision, Branch: version.Branch,
		BuildUser: version.BuildUser, BuildDate: version.BuildDate, GoVersion: version.GoVersion}
}

// statusShard is this replica's shard and vantage for the status page (the flags
// were validated when the config was sharded).
func (s *shardFlags) statusShard() status.Shard {
	index, count, _, err := s.resolve()
	if err != nil || count < 1 {
		index, count = 0, 1
	}
	v := s.vantage
	if v == "" {
		v = os.Getenv(EnvVantage)
	}
	return status.Shard{Index: index, Count: count, Vantage: v}
}

func newOnceCmd(g *globalFlags, stdout, stderr io.Writer) *cobra.Command {
	var sf *shardFlags
	cmd := &cobra.Command{
		Use:   "once",
		Short: "Run every configured op once against every target, print a table, exit non-zero if any failed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(g, stderr)
			if err != nil {
				return err
			}
			cfg, err := loadConfig(g, stderr)
			if err != nil {
				return err
			}
			if cfg, err = sf.apply(cfg, logger); err != nil {
				return usageError(err)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			instance := engine.EphemeralInstanceID(cfg.Global.InstanceID, "once")
			fmt.Fprintf(stderr, "once: instance id %s (a namespace of its own, removed at exit; the daemon's canary data is never touched)\n", instance)
			rows := engine.RunOnce(ctx, cfg, instance, logger)
			tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TARGET\tBACKEND\tOP\tRESULT\tLATENCY\tCAUSE\tDETAIL")
			failed := 0
			for _, r := range rows {
				result, cause, detail := "ok", "-", ""
				if r.Err != nil {
					failed++
					result, cause, detail = "error", string(r.Cause), r.Err.Error()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Target, r.Backend, r.Op, result,
					r.Latency.Round(10*time.Microsecond), cause, detail)
			}
			_ = tw.Flush()
			if failed > 0 {
				fmt.Fprintf(stderr, "%d of %d op(s) failed\n", failed, len(rows))
				return exitError{code: exitFailed}
			}
			return nil
		},
	}
	sf = addShardFlags(cmd.Flags())
	return cmd
}

// useStateDir points the durability ledgers' store at global.state_dir,
// creating it; without one the ledgers live in memory and say so.
func useStateDir(store *probes.LedgerStore, dir string, logger *slog.Logger) error {
	if dir == "" {
		logger.Info("durability ledger kept in memory (global.state_dir is not set): a restart forgets the acknowledged writes still to read back")
		store.SetDir("")
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("global.state_dir: %w", err)
	}
	probe, err := os.CreateTemp(dir, ".write-test*")
	if err != nil {
		return fmt.Errorf("global.state_dir: cannot write there: %w", err)
	}
	probe.Close()
	os.Remove(probe.Name())
	logger.Info("durability ledger kept under global.state_dir", "state_dir", dir)
	store.SetDir(dir)
	return nil
}

// logWarnings logs the durability ledger's rate warnings check-config prints,
// once per start or reload (a probe logs its own probes.Warner warnings when built).
func logWarnings(cfg *config.Config, logger *slog.Logger) {
	for _, t := range cfg.Targets {
		for _, msg := range t.LedgerWarnings() {
			logger.Warn(msg, "target", t.Name)
		}
	}
}
