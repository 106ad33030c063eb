package deploy

// The two recipes of the one image agree, and the release gate script works:
// checks that need no tool (the build and run are in image_integration_test.go
// and release_test.go).

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// finalStage returns the instructions of a Containerfile's last stage (after
// its last FROM, which is included), continuation lines joined, comments dropped.
func finalStage(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ins []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur += c + " "
			continue
		}
		ins = append(ins, strings.Join(strings.Fields(cur+trimmed), " "))
		cur = ""
	}
	last := -1
	for i, in := range ins {
		if strings.HasPrefix(strings.ToUpper(in), "FROM ") {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("%s has no FROM", path)
	}
	return ins[last:]
}

// TestDockerfileMatchesContainerfile: the Dockerfile (builders with a
// registry) and deploy/image/Containerfile (make image, built and run by
// TestImage) make the same image: the same final stage, instruction by
// instruction, the COPY sources aside; both fill the rootfs with
// deploy/image/rootfs.sh.
func TestDockerfileMatchesContainerfile(t *testing.T) {
	docker := finalStage(t, filepath.Join(repoRoot, "Dockerfile"))
	local := finalStage(t, filepath.Join(repoRoot, "deploy", "image", "Containerfile"))
	// COPY [--from=build] SRC DST: the same destination, from the build stage in the Dockerfile.
	copyRE := regexp.MustCompile(`^COPY (--from=build )?(\S+) (\S+)$`)
	normalise := func(ins []string, fromBuild bool) []string {
		var out []string
		for _, in := range ins {
			if m := copyRE.FindStringSubmatch(in); m != nil {
				if (m[1] != "") != fromBuild {
					t.Errorf("%q: the Dockerfile copies from its build stage, the Containerfile from its context", in)
				}
				in = "COPY <src> " + m[3]
			}
			out = append(out, in)
		}
		return out
	}
	d, c := normalise(docker, true), normalise(local, false)
	if !slices.Equal(d, c) {
		t.Errorf("final stages differ:\nDockerfile:\n  %s\nContainerfile:\n  %s", strings.Join(d, "\n  "), strings.Join(c, "\n  "))
	}
	if len(d) == 0 || d[0] != "FROM scratch" {
		t.Errorf("final stage starts %q, want FROM scratch", d)
	}
	for _, want := range []string{"USER 65532:65532", `ENTRYPOINT ["/usr/local/bin/dbcanary"]`, `CMD ["run", "--config.file=/etc/dbcanary/dbcanary.yaml"]`} {
		if !slices.Contains(c, want) {
			t.Errorf("Containerfile lacks %q", want)
		}
	}
	// Same rootfs source on both sides.
	for file, want := range map[string]string{
		"Dockerfile":            "COPY --from=build /image/rootfs/ /",
		"deploy/image/build.sh": `bash "$here/rootfs.sh" "$ctx/rootfs"`,
	} {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", file, want)
		}
	}
	df, _ := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if !strings.Contains(string(df), "bash deploy/image/rootfs.sh /image/rootfs") {
		t.Error("the Dockerfile's build stage does not run deploy/image/rootfs.sh /image/rootfs")
	}
	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(ignore), "\n"), "!deploy/image/rootfs.sh") {
		t.Error(".dockerignore does not re-include deploy/image/rootfs.sh, which the Dockerfile runs")
	}
}

// TestImageRootfs: rootfs.sh lays out the user and the CA bundle it is given.
func TestImageRootfs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rootfs")
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot, "deploy", "image", "rootfs.sh"), dir)
	cmd.Env = append(os.Environ(), "DBCANARY_CA_BUNDLE="+ca)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rootfs.sh: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(passwd), "\n"), "nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin") {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", passwd)
	}
	group, err := os.ReadFile(filepath.Join(dir, "etc", "group"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(group), "\n"), "nonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot 65532:\n%s", group)
	}
	st, err := os.Stat(filepath.Join(dir, "etc", "ssl", "certs", "ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("CA bundle mode %v, want 0644 (readable by 65532)", st.Mode())
	}

	// No CA bundle: an error, not an image without one.
	cmd = exec.Command("bash", filepath.Join(repoRoot, "deploy", "image", "rootfs.sh"), filepath.Join(t.TempDir(), "x"))
	cmd.Env = append(os.Environ(), "DBCANARY_CA_BUNDLE="+filepath.Join(t.TempDir(), "missing.crt"))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "no CA bundle") {
		t.Errorf("rootfs.sh without a CA bundle: %v %s", err, out)
	}
}

// TestReleaseNotes: the release workflow's gate (.github/scripts/release-notes.sh)
// passes only when the chart and CHANGELOG.md carry the tag's version, and
// prints that version's section.
func TestReleaseNotes(t *testing.T) {
	script := filepath.Join(repoRoot, ".github", "scripts", "release-notes.sh")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	changelog := write("CHANGELOG.md", `# Changelog

## [1.4.1] - 2026-12-02

## [1.4.0] - unreleased
- coming

## [Unreleased]
- not yet

## [1.2.3] - 2026-11-26
### Added
- the thing

## [1.2.2] - 2026-11-01
- older
`)
	run := func(chart, version string) (string, error) {
		cmd := exec.Command("bash", script, version)
		cmd.Env = append(os.Environ(), "CHART_YAML="+chart, "CHANGELOG="+changelog)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	good := write("Chart.yaml", "apiVersion: v2\nname: dbcanary\nversion: 1.2.3\nappVersion: \"1.2.3\"\n")
	out, err := run(good, "1.2.3")
	if err != nil || !strings.Contains(out, "- the thing") || strings.Contains(out, "older") || strings.Contains(out, "not yet") || !strings.HasPrefix(out, "### Added\n") {
		t.Errorf("release-notes.sh 1.2.3: %v\n%s", err, out)
	}
	for _, tc := range []struct{ chart, version, want string }{
		{write("Chart-app.yaml", "version: 1.2.3\nappVersion: \"1.2.2\"\n"), "1.2.3", "appVersion '1.2.2'"},
		{write("Chart-ver.yaml", "version: 1.2.2\nappVersion: 1.2.3\n"), "1.2.3", "version '1.2.2'"},
		{write("Chart-new.yaml", "version: 1.3.0\nappVersion: 1.3.0\n"), "1.3.0", "no section for 1.3.0"},
		{write("Chart-unreleased.yaml", "version: 1.4.0\nappVersion: 1.4.0\n"), "1.4.0", "still calls 1.4.0 unreleased"},
		{write("Chart-empty.yaml", "version: 1.4.1\nappVersion: 1.4.1\n"), "1.4.1", "an empty section for 1.4.1"},
		{good, "v1.2.3", "without its leading v"},
	} {
		if out, err := run(tc.chart, tc.version); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("release-notes.sh %s with %s: %v %q, want an error naming %q", tc.version, filepath.Base(tc.chart), err, out, tc.want)
		}
	}

	// The real chart's fields parse: its own version passes with a CHANGELOG naming it.
	chart := filepath.Join(chartDir, "Chart.yaml")
	b, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version: (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no version", chart)
	}
	v := string(m[1])
	changelog = write("CHANGELOG-real.md", "## ["+v+"] - 2026-11-26\n- first release\n")
	if out, err := run(chart, v); err != nil || strings.TrimSpace(out) != "- first release" {
		t.Errorf("release-notes.sh %s on the real chart: %v\n%s", v, err, out)
	}
}
