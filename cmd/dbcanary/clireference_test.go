package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// updateCLIReference rewrites docs/cli.md instead of comparing it (make generate).
var updateCLIReference = flag.Bool("update", false, "rewrite docs/cli.md from the commands' definitions")

// cliReferencePath is the generated command-line reference, relative to this package.
var cliReferencePath = filepath.Join("..", "..", "docs", "cli.md")

// TestCLIReference holds docs/cli.md to the commands and flags the binary
// defines, so the reference is never written by hand nor left stale.
func TestCLIReference(t *testing.T) {
	root, _ := newRootCmd(io.Discard, io.Discard)
	got := cliReference(root)
	if *updateCLIReference {
		if err := os.WriteFile(cliReferencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(cliReferencePath)
	if err != nil {
		t.Fatalf("%v: run `make generate` and commit docs/cli.md", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/cli.md does not match the commands and flags of cmd/dbcanary: run `make generate` and commit it\n%s", firstDifference(string(want), string(got)))
	}
}

// firstDifference shows the first line where the committed reference and the
// binary's differ, so the failure says what changed.
func firstDifference(committed, generated string) string {
	a, b := strings.Split(committed, "\n"), strings.Split(generated, "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  docs/cli.md: %q\n  binary:      %q", i+1, x, y)
		}
	}
	return ""
}

// cliReference renders the command tree as one Markdown page: an index of
// the commands, the global flags, then each command with its usage and flags.
func cliReference(root *cobra.Command) []byte {
	var b bytes.Buffer
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("<!-- Generated from the cobra commands of cmd/dbcanary by `make generate` (cmd/dbcanary/clireference_test.go); do not edit by hand. -->\n\n")
	fmt.Fprintf(&b, "Every `%s` command and flag, generated from the binary's own definitions: look up a\n", root.Name())
	fmt.Fprintf(&b, "command below, or run `%s <command> --help`, which prints the same text. The flags follow the\n", root.Name())
	b.WriteString("Prometheus exporter conventions (`--config.file`, `--web.listen-address`, `--log.level`).\n\n")
	b.WriteString("| command | what it does |\n|---|---|\n")
	cmds := commandTree(root)
	for _, c := range cmds[1:] {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.CommandPath(), anchor(c.CommandPath()), cell(c.Short))
	}
	b.WriteString("\n## Global flags\n\nEvery command takes these.\n")
	flagTable(&b, root.PersistentFlags())
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n## %s\n\n%s.\n", c.CommandPath(), cell(strings.TrimSuffix(c.Short, ".")))
		if c.Long != "" {
			fmt.Fprintf(&b, "\n```text\n%s\n```\n", strings.TrimRight(c.Long, "\n"))
		}
		if c.Runnable() {
			fmt.Fprintf(&b, "\nUsage: `%s`\n", c.UseLine())
		}
		if c.Example != "" {
			fmt.Fprintf(&b, "\nExamples:\n\n```sh\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
		}
		if c != root {
			flagTable(&b, c.LocalFlags())
			for p := c.Parent(); p != root; p = p.Parent() {
				if p.HasAvailablePersistentFlags() {
					fmt.Fprintf(&b, "\nAlso takes the flags of [`%s`](#%s).\n", p.CommandPath(), anchor(p.CommandPath()))
				}
			}
		}
		if c.HasAvailableSubCommands() {
			b.WriteString("\nSubcommands:")
			for _, s := range c.Commands() {
				if s.IsAvailableCommand() {
					fmt.Fprintf(&b, " [`%s`](#%s)", s.Name(), anchor(s.CommandPath()))
				}
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

// commandTree lists the available commands depth first, root first, in
// cobra's (alphabetical) order.
func commandTree(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out = append(out, commandTree(s)...)
		}
	}
	return out
}

// flagTable writes one row per visible flag, nothing when there is none;
// --help, which cobra adds to every command, is left out.
func flagTable(b *bytes.Buffer, fs *pflag.FlagSet) {
	header := "\n| flag | type | default | meaning |\n|---|---|---|---|\n"
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		b.WriteString(header)
		header = ""
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "[]" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", name, f.Value.Type(), def, cell(f.Usage))
	})
}

// anchor is the fragment GitHub gives the heading "## text".
func anchor(heading string) string {
	return strings.ReplaceAll(strings.ToLower(heading), " ", "-")
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}
