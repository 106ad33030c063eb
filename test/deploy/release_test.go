//go:build integration

package deploy

// The release build (.goreleaser.yaml) checked and run as a snapshot by the
// pinned goreleaser, and the release workflow checked by actionlint; both
// tools built and cached by test/tools/*.sh.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// tool installs (once, cached) a tool with test/tools/<name>.sh and returns its path.
func tool(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot, "test", "tools", name+".sh"), "install")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("test/tools/%s.sh install: %v\n%s", name, err, stderr.String())
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatalf("test/tools/%s.sh install printed no path", name)
	}
	return lines[len(lines)-1]
}

// artifact is an entry of goreleaser's dist/artifacts.json.
type artifact struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Goos   string `json:"goos"`
	Goarch string `json:"goarch"`
	Type   string `json:"type"`
}

// TestGoreleaser: `goreleaser check` accepts .goreleaser.yaml, and a full
// snapshot release (both architectures, archives, checksums; nothing
// published) gives static binaries that run and carry the version in their
// ldflags, archives holding the binary and the docs, and correct checksums;
// and the release workflow's image step (no push) builds an image per
// architecture from those binaries.
func TestGoreleaser(t *testing.T) {
	gr := tool(t, "goreleaser")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gr, args...)
		cmd.Dir = repoRoot
		// goreleaser reads the remote's URL (git ls-remote --get-url) and, in a
		// snapshot, ignores every git fact when that fails: the revision
		// would be "none". A clone has a remote; give this checkout one for
		// goreleaser's git calls only (git reads config from the environment).
		cmd.Env = append(os.Environ(), "GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=remote.origin.url", "GIT_CONFIG_VALUE_0=https://github.com/dbcanary/dbcanary.git")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("goreleaser %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("check", "--config", ".goreleaser.yaml")

	// The same configuration with the dist folder in a temp dir: the shared
	// checkout's dist/ stays untouched.
	cfg, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(strings.Split(string(cfg), "\n"), func(l string) bool { return strings.HasPrefix(l, "dist:") }) {
		t.Fatal(".goreleaser.yaml sets dist: this test sets its own")
	}
	tmp := t.TempDir()
	dist := filepath.Join(tmp, "dist")
	cfgFile := filepath.Join(tmp, "goreleaser.yaml")
	if err := os.WriteFile(cfgFile, append(cfg, []byte("\ndist: "+dist+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	run("release", "--snapshot", "--clean", "--skip=publish", "--config", cfgFile)
	stack.Figure(t, "goreleaser snapshot release (linux amd64+arm64, archives, checksums) in %s", time.Since(t0).Round(time.Second))

	var meta struct {
		Version string `json:"version"`
		Commit  string `json:"commit"`
	}
	readJSON(t, filepath.Join(dist, "metadata.json"), &meta)
	// The commit goreleaser built (HEAD then: others may commit meanwhile).
	if meta.Version == "" || len(meta.Commit) != 40 || exec.Command("git", "-C", repoRoot, "cat-file", "-e", meta.Commit+"^{commit}").Run() != nil {
		t.Fatalf("dist/metadata.json: version %q commit %q, want a version and a commit of this repository", meta.Version, meta.Commit)
	}
	var arts []artifact
	readJSON(t, filepath.Join(dist, "artifacts.json"), &arts)
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(repoRoot, p)
	}
	find := func(typ, arch string) *artifact {
		for i := range arts {
			if arts[i].Type == typ && arts[i].Goos == "linux" && arts[i].Goarch == arch {
				return &arts[i]
			}
		}
		t.Fatalf("dist/artifacts.json has no %s for linux/%s (the release workflow looks the binaries up there)", typ, arch)
		return nil
	}

	for _, arch := range []string{"amd64", "arm64"} {
		bin := abs(find("Binary", arch).Path)
		// The build settings Go recorded. It does not record -ldflags under
		// -trimpath (go.dev/issue/52372), so the -X values are checked in the
		// binary's data below and, on this host's architecture, by running it.
		out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m %s: %v\n%s", bin, err, out)
		}
		for _, want := range []string{"\tbuild\tCGO_ENABLED=0\n", "\tbuild\tGOOS=linux\n", "\tbuild\tGOARCH=" + arch + "\n", "\tbuild\t-trimpath=true\n"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: go version -m lacks %q:\n%s", bin, strings.TrimSpace(want), out)
			}
		}
		if out, _ := exec.Command("ldd", bin).CombinedOutput(); !strings.Contains(string(out), "not a dynamic executable") {
			t.Errorf("ldd %s: %s", bin, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{meta.Version, meta.Commit, "goreleaser"} {
			if !bytes.Contains(data, []byte(want)) {
				t.Errorf("%s does not hold %q: the ldflags did not set it", bin, want)
			}
		}
		if arch == runtime.GOARCH {
			if out, err := exec.Command(bin, "check-config", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "check-config") {
				t.Errorf("%s check-config --help: %v\n%s", bin, err, out)
			}
			out, err := exec.Command(bin, "version").CombinedOutput()
			for _, want := range []string{"version " + meta.Version + " ", "revision: " + meta.Commit, "build user:       goreleaser", "build date:       2"} {
				if err != nil || !strings.Contains(string(out), want) {
					t.Errorf("%s version: %v\n%s\nwant %q", bin, err, out, want)
				}
			}
		}

		// The archive: one top folder with the binary and the docs.
		archive := find("Archive", arch)
		top := fmt.Sprintf("dbcanary-%s.linux-%s", meta.Version, arch)
		if archive.Name != top+".tar.gz" {
			t.Errorf("archive %s, want %s.tar.gz", archive.Name, top)
		}
		files := tarGzFiles(t, abs(archive.Path))
		want := []string{top + "/README.md", top + "/dbcanary"}
		for _, doc := range []string{"LICENSE", "NOTICE", "CHANGELOG.md"} {
			if _, err := os.Stat(filepath.Join(repoRoot, doc)); err == nil {
				want = append(want, top+"/"+doc)
			}
		}
		slices.Sort(want)
		if !slices.Equal(files, want) {
			t.Errorf("%s holds %v, want %v", archive.Name, files, want)
		}
	}

	// The release workflow's image step, without the push: one image per
	// architecture from the released binaries, gathered in a manifest list.
	list := fmt.Sprintf("localhost/dbcanary-release-test:%d", os.Getpid())
	mustPodman(t, "manifest", "create", list)
	t.Cleanup(func() {
		if _, err := podman(t, "manifest", "rm", list); err != nil {
			t.Error(err)
		}
	})
	for _, arch := range []string{"amd64", "arm64"} {
		tag := list + "-" + arch
		cmd := exec.Command("bash", filepath.Join(repoRoot, "deploy", "image", "build.sh"), abs(find("Binary", arch).Path), tag, "--platform", "linux/"+arch)
		cmd.Env = append(os.Environ(), "VERSION="+meta.Version, "REVISION="+meta.Commit)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("deploy/image/build.sh linux/%s: %v\n%s", arch, err, out)
		}
		t.Cleanup(func() {
			if _, err := podman(t, "rmi", "--force", tag); err != nil {
				t.Error(err)
			}
		})
		if got := mustPodman(t, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", tag); got != "linux/"+arch {
			t.Errorf("image %s is for %s, want linux/%s", tag, got, arch)
		}
		mustPodman(t, "manifest", "add", list, "containers-storage:"+tag)
	}
	var manifest struct {
		Manifests []struct {
			Platform struct{ OS, Architecture string }
		}
	}
	inspectJSON(t, mustPodman(t, "manifest", "inspect", list), &manifest)
	var platforms []string
	for _, m := range manifest.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("manifest list %s holds %v, want linux/amd64 and linux/arm64", list, platforms)
	}

	// Checksums: one line per archive, each correct.
	var sums *artifact
	for i := range arts {
		if arts[i].Type == "Checksum" {
			sums = &arts[i]
		}
	}
	if sums == nil || sums.Name != "sha256sums.txt" {
		t.Fatalf("no sha256sums.txt in dist/artifacts.json: %+v", sums)
	}
	b, err := os.ReadFile(abs(sums.Path))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Errorf("sha256sums.txt has %d lines, want one per archive:\n%s", len(lines), b)
	}
	for _, line := range lines {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("sha256sums.txt line %q", line)
		}
		f, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(f); hex.EncodeToString(h[:]) != sum {
			t.Errorf("sha256sums.txt: %s does not match %s", sum, name)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// tarGzFiles lists the regular files of a .tar.gz, sorted.
func tarGzFiles(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, h.Name)
		}
	}
	slices.Sort(files)
	return files
}

// TestReleaseWorkflow: actionlint (with shellcheck on every run: script)
// finds nothing in .github/workflows, and finds a planted mistake, so the
// pass is not an empty check.
func TestReleaseWorkflow(t *testing.T) {
	al := tool(t, "actionlint")
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Fatalf("shellcheck (installed by test/tools/actionlint.sh) is not in the PATH: %v", err)
	}
	workflows, err := filepath.Glob(filepath.Join(repoRoot, ".github", "workflows", "*.yml"))
	if err != nil || !slices.Contains(workflows, filepath.Join(repoRoot, ".github", "workflows", "release.yml")) {
		t.Fatalf("no .github/workflows/release.yml (%v)", err)
	}
	cmd := exec.Command(al, append([]string{"-no-color"}, workflows...)...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}

	// The same workflow with an unquoted variable and a misspelt action input.
	b, err := os.ReadFile(filepath.Join(repoRoot, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), `"$IMAGE:$VERSION"`, `$IMAGE:$VERSION`, 1)
	bad = strings.Replace(bad, "go-version-file:", "go-version-fil:", 1)
	if bad == string(b) {
		t.Fatal("could not plant the mistakes in release.yml")
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	badFile := filepath.Join(dir, ".github", "workflows", "release.yml")
	if err := os.MkdirAll(filepath.Dir(badFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badFile, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(al, "-no-color", badFile)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SC2086") || !strings.Contains(string(out), "go-version-fil") {
		t.Errorf("actionlint on a broken workflow: %v\n%s\nwant SC2086 and the misspelt input reported", err, out)
	}
}
