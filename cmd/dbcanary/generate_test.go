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
