package generate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/probes"
)

// namesBackends are the Go files outside probes/<name>/ that may name a
// backend, and why.
var namesBackends = map[string]string{
	// Sample label values of the backend-wide alerts' promtool scenarios:
	// those rules select no backend, and the committed test file must not change.
	"internal/generate/promtests.go": "sample labels",
	// The soak's table of how to start, proxy and probe each store.
	"test/soak/soak.go": "the soak's entries",
}

// TestBackendNamedOnlyInItsPackage: no Go file of the program outside
// probes/<name>/ (tests, docs, examples and testdata aside) names a
// registered backend in a string literal, and none under internal/ or cmd/
// imports a probe package but probes/all: everything else reads the
// registry, so adding a backend never edits a list elsewhere.
func TestBackendNamedOnlyInItsPackage(t *testing.T) {
	names := probes.Names()
	if len(names) < 2 {
		t.Fatalf("registered backends: %v", names)
	}
	for _, rel := range repoGoFiles(t) {
		dirs := strings.Split(path.Dir(rel), "/")
		if strings.HasSuffix(rel, "_test.go") || (len(dirs) > 1 && dirs[0] == "probes" && slices.Contains(names, dirs[1])) ||
			slices.ContainsFunc(dirs, func(d string) bool { return d == "docs" || d == "examples" || d == "testdata" }) {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), repoRoot()+"/"+rel, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checkImports(t, rel, f)
		if _, ok := namesBackends[rel]; ok {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, s) {
					t.Errorf("%s names backend %q: read it from the registry (probes.Lookup, probes.Names)", rel, s)
				}
			}
			return true
		})
	}
}

// checkImports: under internal/ and cmd/, only probes/all links a backend.
func checkImports(t *testing.T, rel string, f *ast.File) {
	t.Helper()
	const prefix = "github.com/dbcanary/dbcanary/probes/"
	if !strings.HasPrefix(rel, "internal/") && !strings.HasPrefix(rel, "cmd/") {
		return
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, prefix) && p != prefix+"all" {
			t.Errorf("%s imports %s: read the backend from the registry (probes.Lookup)", rel, p)
		}
	}
}

// repoGoFiles are the Go files under the repository's root, relative to it
// (hidden directories left out).
func repoGoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot(), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != repoRoot():
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(p, ".go"):
			rel, _ := filepath.Rel(repoRoot(), p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil || len(files) < 10 {
		t.Fatalf("Go files of the repository: %d, %v", len(files), err)
	}
	return files
}

// lookTool finds a program the test needs on PATH, or fails saying so.
func lookTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required and not on PATH: %v", name, err)
	}
	return p
}
