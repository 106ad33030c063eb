package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/bench"
)

// shardOf reads --shard and --start-at (nil: the only driver, starting now).
func (f *benchFlags) shardOf(stderr io.Writer) (*bench.Shard, error) {
	if f.shard == "" && f.startAt == "" {
		return nil, nil
	}
	sh := &bench.Shard{Index: 0, Count: 1}
	if f.shard != "" {
		i, n, err := bench.ParseShard(f.shard)
		if err != nil {
			return nil, fmt.Errorf("--shard %w", err)
		}
		sh.Index, sh.Count = i, n
	}
	if f.startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, f.startAt)
		if err != nil {
			return nil, fmt.Errorf("--start-at %q: want an RFC 3339 time, e.g. %s", f.startAt, time.Now().UTC().Add(time.Minute).Truncate(time.Second).Format(time.RFC3339))
		}
		sh.StartAt = t
		if late := time.Since(t); late > 0 {
			fmt.Fprintf(stderr, "bench: --start-at %s passed %s ago: this driver starts late (the merged report shows by how much)\n", f.startAt, late.Round(time.Millisecond))
		}
	} else if sh.Count > 1 {
		return nil, fmt.Errorf("--shard %s needs --start-at: the drivers must start together (the same RFC 3339 time for all)", f.shard)
	}
	return sh, nil
}

// newBenchMergeCmd is `dbcanary bench merge REPORT...`.
func newBenchMergeCmd(stdout, stderr io.Writer) *cobra.Command {
	var jsonOut, htmlOut, base string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "merge REPORT.json...",
		Short: "Merge the JSON reports of the drivers of one sharded bench run (--shard i/N) into one report",
		Long: `merge adds the JSON reports of the N drivers of one run (each run with
dbcanary bench --shard i/N --start-at T --json FILE) into one report, exactly:
op counts added, latency histograms merged bucket by bucket (so each
percentile is the one of every driver's samples together), rates summed
(each driver's over its own window) and each driver's own row kept in a
drivers table. It refuses reports of different profiles, targets,
parameters or stages, a missing or repeated driver, and stages whose
windows do not overlap.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := waitForReports(cmd, args, wait, stderr); err != nil {
				return err
			}
			return runBenchMerge(cmd, base, args, jsonOut, htmlOut, stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&jsonOut, "json", "", "Write the merged report as JSON to this file (- for stdout instead of the tables).")
	cmd.Flags().StringVar(&htmlOut, "html", "", "Write the merged report as a self-contained HTML page to this file.")
	cmd.Flags().DurationVar(&wait, "wait", 0, "Wait this long for reports that do not exist yet (drivers still running, e.g. the chart's merge Job beside its drivers); 0: they must exist.")
	cmd.Flags().StringVar(&base, "baseline", "baselines/james-reference.yaml", "Baseline file with the reference figures (none compared when the default file is absent).")
	return cmd
}

// waitForReports waits until every path exists, at most wait.
func waitForReports(cmd *cobra.Command, paths []string, wait time.Duration, stderr io.Writer) error {
	if wait <= 0 {
		return nil
	}
	deadline := time.Now().Add(wait)
	said := false
	for {
		var missing []string
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, p)
			}
		}
		switch {
		case len(missing) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("--wait %s: still missing %s", wait, strings.Join(missing, ", "))
		case !said:
			fmt.Fprintf(stderr, "bench merge: waiting up to %s for %s\n", wait, strings.Join(missing, ", "))
			said = true
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(time.Second):
		}
	}
}

func runBenchMerge(cmd *cobra.Command, basePath string, paths []string, jsonOut, htmlOut string, stdout, stderr io.Writer) error {
	var reports []*bench.Report
	for _, p := range paths {
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		r, err := bench.ReadReport(in, p)
		in.Close()
		if err != nil {
			return err
		}
		reports = append(reports, r)
	}
	var base *baseline.File
	if b, err := baseline.Load(basePath); err == nil {
		base = b
	} else if cmd.Flags().Changed("baseline") || !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--baseline: %w", err)
	}
	m, err := bench.Merge(reports, paths, base)
	if err != nil {
		return err
	}
	if m.Failed > 0 {
		fmt.Fprintf(stderr, "bench merge: the drivers' measured stages had %d failed op(s) (see the error rate rows and the drivers table)\n", m.Failed)
	}
	return writeReport(m, jsonOut, htmlOut, stdout, stderr)
}
