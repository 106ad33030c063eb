// Package licence checks that dbcanary, released under Apache-2.0, depends only
// on modules whose licences allow that: every module go.mod requires is found
// in the module cache (`make deps` downloads them), its licence file is
// classified by github.com/google/licensecheck, and the licence must be one of
// the permissive set below. A module that carries a NOTICE file must be named in
// dbcanary's NOTICE (Apache-2.0 section 4(d)) when it is linked into the binary.
package licence

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/licensecheck"
)

// allowed are the licences compatible with distributing dbcanary under
// Apache-2.0 (the ASF's "category A" list, plus MPL-2.0 which the ASF puts in
// category B: fine to depend on unmodified, as dbcanary does).
var allowed = map[string]bool{
	"Apache-2.0": true, "MIT": true, "BSD-2-Clause": true, "BSD-3-Clause": true,
	"ISC": true, "MPL-2.0": true, "Unlicense": true, "CC0-1.0": true, "0BSD": true, "Zlib": true,
	"BSD-2-Clause-FreeBSD": true, "BSD-3-Clause-Clear": true,
}

// licenceFiles are the names a module's licence goes by, in the order tried.
var licenceFiles = []string{"LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE", "COPYING", "LICENSE-APACHE", "LICENSE.MIT"}

type module struct {
	Path, Version, Dir, Error string
}

func repoRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// requiredModules lists go.mod's requirements with their directories in the
// module cache.
func requiredModules(t *testing.T, root string) []module {
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var gomod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &gomod); err != nil {
		t.Fatal(err)
	}
	args := []string{"mod", "download", "-json"}
	for _, r := range gomod.Require {
		args = append(args, r.Path+"@"+r.Version)
	}
	cmd = exec.Command("go", args...)
	cmd.Dir = root
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go mod download (run `make deps` first): %v\n%s", err, out)
	}
	var mods []module
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m module
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
	}
	if len(mods) != len(gomod.Require) {
		t.Fatalf("go mod download listed %d modules, go.mod requires %d", len(mods), len(gomod.Require))
	}
	return mods
}

// licenceOf classifies the first licence file found in dir.
func licenceOf(dir string) (file string, ids []string) {
	for _, name := range licenceFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		for _, m := range licensecheck.Scan(b).Match {
			if !seen[m.ID] {
				seen[m.ID] = true
				ids = append(ids, m.ID)
			}
		}
		sort.Strings(ids)
		return name, ids
	}
	return "", nil
}

// linkedModules are the module paths compiled into the dbcanary binary.
func linkedModules(t *testing.T, root string) map[string]bool {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./cmd/dbcanary")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/dbcanary: %v", err)
	}
	linked := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		linked[p] = true
	}
	return linked
}

func TestOwnLicenceIsApache2(t *testing.T) {
	file, ids := licenceOf(repoRoot(t))
	if file != "LICENSE" || len(ids) != 1 || ids[0] != "Apache-2.0" {
		t.Errorf("dbcanary's own licence: %s %v, want LICENSE with Apache-2.0", file, ids)
	}
}

func TestDependencyLicences(t *testing.T) {
	root := repoRoot(t)
	notice, err := os.ReadFile(filepath.Join(root, "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	linked := linkedModules(t, root)
	counts := map[string]int{}
	for _, m := range requiredModules(t, root) {
		if m.Error != "" || m.Dir == "" {
			t.Errorf("%s@%s: not in the module cache: %s", m.Path, m.Version, m.Error)
			continue
		}
		file, ids := licenceOf(m.Dir)
		if file == "" {
			t.Errorf("%s@%s: no licence file (%s) in %s", m.Path, m.Version, strings.Join(licenceFiles, ", "), m.Dir)
			continue
		}
		if len(ids) == 0 {
			t.Errorf("%s@%s: %s matches no known licence", m.Path, m.Version, file)
		}
		for _, id := range ids {
			if !allowed[id] {
				t.Errorf("%s@%s: %s is %s, not compatible with distributing dbcanary under Apache-2.0", m.Path, m.Version, file, id)
			}
			counts[id]++
		}
		if _, err := os.Stat(filepath.Join(m.Dir, "NOTICE")); err == nil && linked[m.Path] && !bytes.Contains(notice, []byte("==== "+m.Path+" ")) {
			t.Errorf("%s@%s is linked into dbcanary and has a NOTICE file: NOTICE must reproduce it (Apache-2.0 section 4(d); docs/release.md says how)", m.Path, m.Version)
		}
	}
	t.Logf("licences of go.mod's modules: %v", counts)
}
