package generate

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// maxOutsideFiles bounds the files a new backend writes by hand outside
// probes/<name>/ (issue #30): one import line, its stack script, its docs page.
const maxOutsideFiles = 3

// docStep is one step of docs/adding-a-probe.md: a marker comment and the
// code block under it.
type docStep struct {
	Kind     string // file, import into, insert, append or run
	Path     string
	After    string // insert: the line the block goes after
	Optional bool   // the step is marked optional (not counted against maxOutsideFiles)
	Body     string
}

var markerRE = regexp.MustCompile(`^<!-- (optional )?(file|import into|insert|append|run):?\s*(.*?)\s*-->$`)

// docSteps reads the marked code blocks of the page, in order.
func docSteps(doc []byte) ([]docStep, error) {
	var steps []docStep
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for line := 0; sc.Scan(); line++ {
		m := markerRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		s := docStep{Kind: m[2], Path: m[3], Optional: m[1] != ""}
		if s.Kind == "insert" {
			s.Path, s.After, _ = strings.Cut(s.Path, " after: ")
		}
		if (s.Path == "") != (s.Kind == "run") || (s.Kind == "insert" && s.After == "") {
			return nil, fmt.Errorf("line %d: marker %q lacks its path (or has one)", line+1, sc.Text())
		}
		for sc.Scan() && strings.TrimSpace(sc.Text()) == "" {
		}
		open := sc.Text()
		fence := open[:len(open)-len(strings.TrimLeft(open, "`"))]
		if len(fence) < 3 {
			return nil, fmt.Errorf("line %d: marker %q is not followed by a code block", line+1, m[0])
		}
		var body []string
		for sc.Scan() && sc.Text() != fence {
			body = append(body, sc.Text())
		}
		s.Body = strings.Join(body, "\n") + "\n"
		steps = append(steps, s)
	}
	return steps, sc.Err()
}

// copyRepo copies the repository's files (git ls-files) into a new directory.
func copyRepo(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(lookTool(t, "git"), "-C", repoRoot(), "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repoRoot(), rel)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: %v (mode %v)", rel, err, fi.Mode())
		}
		data, err := os.ReadFile(src)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, rel), data, fi.Mode().Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// apply carries out one step in dir.
func (s docStep) apply(t *testing.T, dir string, env []string) {
	t.Helper()
	if s.Kind == "run" {
		run(t, dir, env, lookTool(t, "bash"), "-euo", "pipefail", "-c", s.Body)
		return
	}
	p := filepath.Join(dir, s.Path)
	old, err := os.ReadFile(p)
	if s.Kind != "file" && err != nil {
		t.Fatalf("%s %s: %v", s.Kind, s.Path, err)
	}
	var data string
	switch s.Kind {
	case "file":
		data = s.Body
		if strings.HasSuffix(s.Path, ".go") {
			if f, err := format.Source([]byte(data)); err != nil || string(f) != data {
				t.Errorf("docs/adding-a-probe.md: %s is not gofmt'ed (%v)", s.Path, err)
			}
		}
	case "import into":
		data = insertAt(t, string(old), regexp.MustCompile(`(?m)^\)$`), strings.Index(string(old), "import ("), s)
	case "insert":
		data = insertAt(t, string(old), regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(s.After)+`\n`), 0, s)
	case "append":
		data = strings.TrimRight(string(old), "\n") + "\n" + s.Body
	}
	mode := os.FileMode(0o644)
	if strings.HasSuffix(s.Path, ".sh") {
		mode = 0o755
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// insertAt puts the step's block before the first match of re at or after
// from (import into: the import block's closing parenthesis) or, for
// insert, after the matched line.
func insertAt(t *testing.T, old string, re *regexp.Regexp, from int, s docStep) string {
	t.Helper()
	loc := []int(nil)
	if from >= 0 {
		loc = re.FindStringIndex(old[from:])
	}
	if loc == nil {
		t.Fatalf("docs/adding-a-probe.md: %s %s: no %q there", s.Kind, s.Path, re)
	}
	at := from + loc[0]
	if s.Kind == "insert" {
		at = from + loc[1]
	}
	return old[:at] + s.Body + old[at:]
}

// run runs a command in dir and fails the test with its output.
func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// TestAddProbe follows docs/adding-a-probe.md literally in a copy of the
// repository: it writes each marked code block where its marker says, runs
// each marked command (`make generate` among them), then builds and vets
// everything and runs the new package's tests, probes/all's and this
// package's, and promtool on the new backend's generated rule tests. It
// fails when the page misses a step or a step breaks something, and logs
// how many files a new backend writes by hand and how many are generated.
func TestAddProbe(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "adding-a-probe.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := docSteps(doc)
	if err != nil {
		t.Fatalf("docs/adding-a-probe.md: %v", err)
	}
	name := backendOf(t, steps)
	dir := copyRepo(t)
	// -trimpath: the copy's packages share the build cache from one run to the next.
	env := append(os.Environ(), "DBCANARY_STACK_DIR="+t.TempDir(), "GOFLAGS=-trimpath "+os.Getenv("GOFLAGS"))
	required := map[string]bool{} // hand-written file → a required step writes it
	for _, s := range steps {
		s.apply(t, dir, env)
		if s.Kind != "run" {
			required[s.Path] = required[s.Path] || !s.Optional
		}
	}
	var own, outside, optional, generated []string
	for _, f := range changedFiles(t, dir) {
		switch req, hand := required[f]; {
		case !hand:
			generated = append(generated, f)
		case strings.HasPrefix(f, "probes/"+name+"/"):
			own = append(own, f)
		case req:
			outside = append(outside, f)
		default:
			optional = append(optional, f)
		}
	}
	t.Logf("adding backend %q by docs/adding-a-probe.md: %d files in probes/%s/, %d hand-written outside it (%s), %d optional (%s), %d generated (%s)",
		name, len(own), name, len(outside), strings.Join(outside, " "), len(optional), strings.Join(optional, " "), len(generated), strings.Join(generated, " "))
	if len(outside) > maxOutsideFiles {
		t.Errorf("a backend writes %d files by hand outside probes/%s/, at most %d", len(outside), name, maxOutsideFiles)
	}
	if !slices.Contains(generated, "dashboards/dbcanary-"+name+".json") {
		t.Errorf("the steps did not generate the backend's board (make generate missing?): %v", generated)
	}
	for _, f := range generated {
		if !bytes.Contains(doc, []byte(f)) {
			t.Errorf("docs/adding-a-probe.md does not name %s, which its steps regenerate", f)
		}
	}
	goTool := lookTool(t, "go")
	run(t, dir, env, goTool, "build", "./...")
	run(t, dir, env, goTool, "vet", "./...")
	run(t, dir, env, goTool, "test", "-count=1", "-skip", "^TestAddProbe$", "./probes/"+name+"/", "./probes/all/", "./internal/generate/")
	promtoolBackend(t, dir, env, name)
}

// backendOf is the backend the page adds: the directory of its first file under probes/.
func backendOf(t *testing.T, steps []docStep) string {
	t.Helper()
	for _, s := range steps {
		if parts := strings.Split(s.Path, "/"); s.Kind == "file" && len(parts) == 3 && parts[0] == "probes" {
			return parts[1]
		}
	}
	t.Fatal("docs/adding-a-probe.md writes no file under probes/<name>/")
	return ""
}

// changedFiles are the files of dir that are new or differ from the repository's, sorted.
func changedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		now, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if was, err := os.ReadFile(filepath.Join(repoRoot(), rel)); err != nil || !bytes.Equal(was, now) {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// promtoolBackend checks the copy's rules and runs the generated promtool
// tests of the new backend's thresholds (the shipped ones are TestPromtool's).
func promtoolBackend(t *testing.T, dir string, env []string, name string) {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(dir, "alerts", "dbcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rules, []byte(`backend="`+name+`"`)) {
		return // no alert figures: no rule of its own to test
	}
	data, err := os.ReadFile(filepath.Join(dir, "alerts", "tests", "dbcanary-rules_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	own := onlyTests(t, data, name+" ")
	if err := os.WriteFile(filepath.Join(dir, "alerts", "tests", name+"_test.yml"), own, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool := installedPromtool(t)
	run(t, dir, env, promtool, "check", "rules", "alerts/dbcanary-rules.yml")
	run(t, dir, env, promtool, "test", "rules", "alerts/tests/"+name+"_test.yml")
}
