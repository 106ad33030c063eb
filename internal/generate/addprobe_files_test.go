package generate

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// maxBackendFiles bounds what adding a backend takes (issue #23): its
// package, the wiring and its figures, as sections 1 to 3 of
// docs/adding-a-probe.md list them, one file per item.
const maxBackendFiles = 12

// namesBackends are the files under internal/ and cmd/ that may name a
// backend, and why.
var namesBackends = map[string]string{
	// Sample label values of the backend-wide alerts' promtool scenarios:
	// those rules select no backend, and the committed test file must not change.
	"internal/generate/promtests.go": "sample labels",
}

// backendFiles are the files the checklist of docs/adding-a-probe.md has a
// new backend write or edit in sections 1 to 3, as paths with <name>.
func backendFiles(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "adding-a-probe.md"))
	if err != nil {
		t.Fatal(err)
	}
	item := regexp.MustCompile("^- \\[ \\] `([^`]+)`")
	var files []string
	section := 0
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			section, _ = strconv.Atoi(strings.TrimSuffix(strings.Fields(line)[1], "."))
			continue
		}
		if section < 1 || section > 3 || !strings.HasPrefix(line, "- [ ]") {
			continue
		}
		m := item.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/adding-a-probe.md, section %d: an item that does not start with its file: %s", section, line)
			continue
		}
		f := m[1]
		if section == 1 {
			f = "probes/<name>/" + f
		}
		if slices.Contains(files, f) {
			t.Errorf("docs/adding-a-probe.md lists %s twice", f)
		}
		files = append(files, f)
	}
	return files
}

// checkAddedFiles: adding a backend is at most maxBackendFiles files, all in
// its own package but the one import line and its figures, and no Go file
// of the program under internal/ or cmd/ knows a backend: none imports a
// probe package but probes/all, none names one. TestAddProbe calls it.
func checkAddedFiles(t *testing.T) {
	t.Helper()
	files := backendFiles(t)
	t.Logf("adding a backend: %d files: %s", len(files), strings.Join(files, " "))
	if len(files) > maxBackendFiles {
		t.Errorf("adding a backend takes %d files (docs/adding-a-probe.md, sections 1 to 3), at most %d", len(files), maxBackendFiles)
	}
	for _, want := range []string{"probes/<name>/register.go", "probes/all/all.go", "baselines/james-reference.yaml"} {
		if !slices.Contains(files, want) {
			t.Errorf("docs/adding-a-probe.md does not list %s", want)
		}
	}
	for _, f := range files {
		if !strings.HasPrefix(f, "probes/<name>/") && f != "probes/all/all.go" && !strings.HasPrefix(f, "baselines/") {
			t.Errorf("adding a backend touches %s, outside its package, probes/all and baselines/", f)
		}
	}

	names := probes.Names()
	if len(names) == 0 {
		t.Fatal("no backend registered")
	}
	const prefix = "github.com/dbcanary/dbcanary/probes/"
	root := repoRoot()
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, prefix) && p != prefix+"all" {
					t.Errorf("%s imports %s: read the backend from the registry (probes.Lookup)", rel, p)
				}
			}
			if _, ok := namesBackends[filepath.ToSlash(rel)]; ok {
				return nil
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, s) {
						t.Errorf("%s names backend %q: read it from the registry", rel, s)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
