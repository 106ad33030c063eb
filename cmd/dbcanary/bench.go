package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/bench"
)

type benchFlags struct {
	profile  string
	list     bool
	target   string
	yes      bool
	base     string
	jsonOut  string
	htmlOut  string
	duration time.Duration
	ops      int64
	warmup   time.Duration
	workers  int
	rate     float64
	mix      string
	timeout  time.Duration
	params   []string
	grace    time.Duration
	cpuProf  string
	shard    string
	startAt  string
}

// newBenchCmd is `dbcanary bench --profile X`: a reference benchmark run with
// the canary's probes, every read verified.
func newBenchCmd(g *globalFlags, stdout, stderr io.Writer) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a reference benchmark (" + strings.Join(profileNames(), ", ") + ") against a target, every read verified, and compare with the documented figures",
		Long: `bench loads one target of the config the way a reference benchmark tool
does (cassandra-stress, YCSB, opensearch-benchmark, rabbitmq-perf-test,
s3-benchmark), with dbcanary's own probes, so every read is verified, then
prints the tables the reference documents show, each figure beside its
documented reference with the ratio and a verdict. --json and --html write
the same report for machines and for people (a self-contained page with
latency and throughput over time).

It writes only in a namespace of its own (removed at the end), stops by
itself at its duration or op count, and refuses a target that is not on this
machine's loopback interface unless --yes is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, g, f, stdout, stderr) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.profile, "profile", "", "Profile to run (--list shows them).")
	fl.BoolVar(&f.list, "list", false, "List the profiles and exit.")
	fl.StringVar(&f.target, "target", "", "Target of the config to load (default: the first of the profile's backend).")
	fl.BoolVar(&f.yes, "yes", false, "Allow a target that is not on the loopback interface: bench puts real load on it.")
	fl.StringVar(&f.base, "baseline", "baselines/james-reference.yaml", "Baseline file with the reference figures (none compared when the default file is absent).")
	fl.StringVar(&f.jsonOut, "json", "", "Write the report as JSON to this file (- for stdout instead of the tables).")
	fl.StringVar(&f.htmlOut, "html", "", "Write the report as a self-contained HTML page to this file.")
	fl.DurationVar(&f.duration, "duration", 0, "Length of each measured stage (default: the profile's).")
	fl.Int64Var(&f.ops, "ops", 0, "End each measured stage after this many ops (with --duration: whichever comes first).")
	fl.DurationVar(&f.warmup, "warmup", 0, "Run each stage this long first, unrecorded (default: the profile's).")
	fl.IntVar(&f.workers, "workers", 0, "Concurrent workers (closed loop: each runs its next op when the previous ended). Default: the profile's.")
	fl.Float64Var(&f.rate, "rate", 0, "Open loop: start ops at this many per second whatever the store does (default: the profile's, mostly a closed loop; --rate 0 asks for a closed loop).")
	fl.StringVar(&f.mix, "mix", "", "Op weights, e.g. insert=1,read=4 (a profile stepping through object sizes takes op kinds, get=1; default: the profile's).")
	fl.DurationVar(&f.timeout, "timeout", 0, "Op timeout (default: the profile's, else the target's).")
	fl.StringArrayVar(&f.params, "param", nil, "A parameter of the profile, name=value (repeat the flag for several):"+profileParams()+".")
	fl.DurationVar(&f.grace, "cleanup-timeout", 30*time.Second, "How long removing the run's namespace may take at the end.")
	fl.StringVar(&f.cpuProf, "cpuprofile", "", "Write a Go CPU profile of the run to this file (go tool pprof), to see where the client path spends its time.")
	fl.StringVar(&f.shard, "shard", "", "Run as driver INDEX of COUNT (e.g. 0/4; INDEX from 0), each in a namespace of its own; `dbcanary bench merge` adds their JSON reports into one. COUNT above 1 needs --start-at.")
	fl.StringVar(&f.startAt, "start-at", "", "Start the first stage at this time (RFC 3339, e.g. 2026-12-06T03:00:00Z), the same for every driver; each later stage at its place in the common schedule.")
	cmd.AddCommand(newBenchMergeCmd(stdout, stderr))
	return cmd
}

func runBench(cmd *cobra.Command, g *globalFlags, f *benchFlags, stdout, stderr io.Writer) error {
	if f.list || f.profile == "" {
		return listProfiles(f, stdout)
	}
	prof, ok := bench.ProfileByName(f.profile)
	if !ok {
		return fmt.Errorf("--profile: unknown profile %q (one of %s)", f.profile, strings.Join(profileNames(), ", "))
	}
	p, err := f.benchParams(cmd, prof)
	if err != nil {
		return usageError(err)
	}
	sh, err := f.shardOf(stderr)
	if err != nil {
		return usageError(err)
	}
	logger, err := newLogger(g, stderr)
	if err != nil {
		return err
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
	} else {
		fmt.Fprintf(stderr, "bench: %s not found: no reference figures to compare with (pass --baseline)\n", f.base)
	}
	ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, _ := os.Hostname()
	ver := version.Version
	if ver == "" {
		ver = "(development build)"
	}
	if f.cpuProf != "" {
		stopProfile, err := startCPUProfile(f.cpuProf)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	pr := newProgress(stderr, 0)
	rep, runErr := bench.Run(ctx, bench.Options{Profile: prof, Params: p, Config: cfg, Target: f.target, Yes: f.yes, Baseline: base,
		Logger: logger, Progress: pr.update, Version: ver, Host: host, Grace: f.grace, Shard: sh})
	pr.done()
	if rep == nil {
		return runErr
	}
	if err := writeReport(rep, f.jsonOut, f.htmlOut, stdout, stderr); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if rep.Failed > 0 {
		fmt.Fprintf(stderr, "bench: %d op(s) failed in measured stages (see the error rate rows)\n", rep.Failed)
		return exitError{code: exitFailed}
	}
	return nil
}

// writeReport writes the tables to stdout (or the JSON with jsonOut "-"),
// and the JSON and HTML files asked for.
func writeReport(rep *bench.Report, jsonOut, htmlOut string, stdout, stderr io.Writer) error {
	var err error
	if jsonOut == "-" {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
		if err == nil && jsonOut != "" {
			err = writeWith(jsonOut, rep.WriteJSON, stderr)
		}
	}
	if err == nil && htmlOut != "" {
		err = writeWith(htmlOut, rep.WriteHTML, stderr)
	}
	return err
}

// startCPUProfile writes a Go CPU profile to path until stop is called (--cpuprofile).
func startCPUProfile(path string) (stop func(), err error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// listProfiles is `dbcanary bench --list`, and the answer to a missing --profile.
func listProfiles(f *benchFlags, stdout io.Writer) error {
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tBACKEND\tREPRODUCES")
	for _, p := range bench.Profiles() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.Backend, p.Reproduces)
	}
	_ = tw.Flush()
	if f.profile == "" && !f.list {
		return errors.New("--profile is required")
	}
	return nil
}

// profileParams lists each profile's own parameters for the help of --param.
func profileParams() string {
	var s string
	for _, p := range bench.Profiles() {
		for _, bp := range p.Params {
			s += fmt.Sprintf("\n%s (%s): %s", bp.Name, p.Name, bp.Help)
		}
	}
	if s == "" {
		return " none"
	}
	return s
}

// profileNames are the bench profiles the registered backends declare.
func profileNames() []string {
	var names []string
	for _, p := range bench.Profiles() {
		names = append(names, p.Name)
	}
	return names
}

// writeWith writes path whole or not at all (a temporary file renamed into
// place), so a reader waiting for it (bench merge --wait) never reads half a report.
func writeWith(path string, write func(io.Writer) error, stderr io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name()) // after the rename: nothing to remove
	if err := write(out); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(out.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(out.Name(), path); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "bench: wrote", path)
	return nil
}

func (f *benchFlags) benchParams(cmd *cobra.Command, prof *bench.Profile) (bench.Params, error) {
	p := bench.Params{Duration: f.duration, Ops: f.ops, Workers: f.workers, Rate: f.rate, Timeout: f.timeout}
	p.ClosedLoop = cmd.Flags().Changed("rate") && f.rate == 0
	if cmd.Flags().Changed("warmup") {
		w := f.warmup
		p.Warmup = &w
	}
	if f.duration < 0 || f.ops < 0 || f.workers < 0 || f.rate < 0 || f.warmup < 0 {
		return p, errors.New("--duration, --ops, --workers, --rate and --warmup must not be negative")
	}
	if f.workers > 4096 {
		return p, fmt.Errorf("--workers %d: at most 4096", f.workers)
	}
	if f.mix != "" {
		mix, err := bench.ParseMix(f.mix)
		if err != nil {
			return p, fmt.Errorf("--mix: %w", err)
		}
		p.Mix = mix
	}
	if err := prof.SetParams(&p, f.params); err != nil {
		return p, fmt.Errorf("--param %w", err)
	}
	return p, nil
}
