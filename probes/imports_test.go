package probes

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// projectGraph lists, with the go command in PATH, every package of the
// module and the project packages it imports (test files aside), by their
// path in the module ("probes/cassandra", "internal/engine"; "" is the root).
func projectGraph(t *testing.T) map[string][]string {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(mod))
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = ".." // the module's root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == root {
			return "", true
		}
		r, ok := strings.CutPrefix(p, root+"/")
		return r, ok
	}
	graph := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg, _ := rel(f[0])
		graph[pkg] = []string{}
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				graph[pkg] = append(graph[pkg], r)
			}
		}
	}
	return graph
}

// under reports whether pkg is dir or a package below it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestImportDirection: imports go one way, cmd → internal → probes ← probes/<backend>.
// The contract (package probes) imports nothing of the project; nothing under
// probes/ imports internal/, cmd/ or test/; a backend imports the contract,
// never a sibling backend (only probes/all, which links them all, does);
// internal/ imports no cmd/; and the durability ledger is no longer a
// package of internal/.
func TestImportDirection(t *testing.T) {
	graph := projectGraph(t)
	if _, ok := graph["probes"]; !ok || len(graph) < 10 {
		t.Fatalf("go list found %d packages and no probes: run from the module", len(graph))
	}
	if _, ok := graph["internal/ledger"]; ok {
		t.Error("internal/ledger exists: the durability ledger is part of the probe contract (package probes)")
	}
	if imps := graph["probes"]; len(imps) > 0 {
		t.Errorf("the contract, package probes, imports %v: it must import nothing of the project", imps)
	}
	edges := 0
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		for _, imp := range graph[pkg] {
			edges++
			if msg := wrongWay(pkg, imp); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
	}
	t.Logf("%d packages, %d imports between them", len(graph), edges)
}

// wrongWay says why pkg must not import imp, or "" when it may.
func wrongWay(pkg, imp string) string {
	switch {
	case under(pkg, "probes") && (under(imp, "internal") || under(imp, "cmd") || under(imp, "test")):
		return "nothing under probes/ imports internal/, cmd/ or test/ (the contract is probes)"
	case under(pkg, "internal") && under(imp, "cmd"):
		return "internal/ never imports cmd/"
	case under(pkg, "probes") && pkg != "probes/all" && imp != "probes":
		return "a backend imports the contract (probes), never a sibling backend"
	}
	return ""
}
