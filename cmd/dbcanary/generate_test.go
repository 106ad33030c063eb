package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateCommand runs `generate rules` and `generate dashboards` into a
// temp dir and compares the output with the committed files.
func TestGenerateCommand(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, sub := range []struct{ name, committed string }{{"rules", "alerts"}, {"dashboards", "dashboards"}} {
		out := t.TempDir()
		var stdout, stderr bytes.Buffer
		cmd := newGenerateCmd(&stdout, &stderr)
		cmd.SetArgs([]string{sub.name, "--baseline", "baselines/james-reference.yaml", "--out", out})
		// The header names the baseline as given; run from the repo root so it matches.
		wd, _ := os.Getwd()
		if err := os.Chdir(root); err != nil {
			t.Fatal(err)
		}
		err := cmd.Execute()
		_ = os.Chdir(wd)
		if err != nil {
			t.Fatalf("generate %s: %v\n%s", sub.name, err, stderr.String())
		}
		n := 0
		err = filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			n++
			rel, _ := filepath.Rel(out, p)
			got, _ := os.ReadFile(p)
			want, err := os.ReadFile(filepath.Join(root, sub.committed, rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s/%s differs from the generator's output (regenerate it)", sub.committed, rel)
			}
			return nil
		})
		if err != nil || n == 0 || !strings.Contains(stdout.String(), "wrote ") {
			t.Errorf("generate %s: %d files, %v, stdout %q", sub.name, n, err, stdout.String())
		}
	}
}

func TestGenerateBadBaseline(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("factors: {warning: 0.5, critical: 3}\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := newGenerateCmd(&stdout, &stderr)
	cmd.SetArgs([]string{"rules", "--baseline", p, "--out", t.TempDir()})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "field bogus not found") {
		t.Errorf("error = %v", err)
	}
}

// TestGenerateDefaultOutputs: each subcommand writes to its own directory by
// default (they once shared one variable, and rules landed in dashboards/).
func TestGenerateDefaultOutputs(t *testing.T) {
	cmd := newGenerateCmd(io.Discard, io.Discard)
	want := map[string]string{"rules": "alerts", "dashboards": "dashboards"}
	for _, sub := range cmd.Commands() {
		if w, ok := want[sub.Name()]; ok {
			if got := sub.Flags().Lookup("out").DefValue; got != w {
				t.Errorf("generate %s --out defaults to %q, want %q", sub.Name(), got, w)
			}
			delete(want, sub.Name())
		}
	}
	if len(want) != 0 {
		t.Errorf("missing subcommands: %v", want)
	}
}

// TestGenerateMerge: --merge adds a calibrated file's per-target figures to
// the reference: its target alerts at its own p99 × its own factors (3 ms ×
// 2 = 8 ms on the bucket ladder's next bound, × 5 = 23 ms with the tolerance),
// the other RabbitMQ targets keep the reference's threshold; a file that does
// not merge is named in the error.
func TestGenerateMerge(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "calibrated.yaml")
	if err := os.WriteFile(cal, []byte(`factors: {warning: 2.0, critical: 5.0}
snap_tolerance: 0.05
sources:
  - {id: calibrate, document: dbcanary calibrate, conditions: test}
figures:
  - {id: cal_mq_a_publish_p99, backend: rabbitmq, ops: [publish], kind: latency, stat: p99, value: 3, unit: ms, quoted: "3 ms", source: calibrate, conditions: c, use: alert, targets: [mq-a], samples: 600}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join("..", "..", "baselines", "james-reference.yaml")
	var stdout, stderr bytes.Buffer
	cmd := newGenerateCmd(&stdout, &stderr)
	cmd.SetArgs([]string{"rules", "--baseline", base, "--merge", cal, "--out", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("generate rules --merge: %v\n%s", err, stderr.String())
	}
	rules, err := os.ReadFile(filepath.Join(dir, "dbcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`--merge ` + cal, `target="mq-a"`, `target!~"mq-a"`} {
		if !strings.Contains(string(rules), want) {
			t.Errorf("merged rules lack %q", want)
		}
	}
	cmd = newGenerateCmd(&stdout, &stderr)
	cmd.SetArgs([]string{"rules", "--baseline", base, "--merge", cal, "--merge", cal, "--out", t.TempDir()})
	err = cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--merge "+cal+": merging: source \"calibrate\" is in both files") {
		t.Errorf("merging a file twice: %v", err)
	}
}
