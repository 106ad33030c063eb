package stack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Two start scripts installing packages at once (make soak-chaos starts its
// servers in parallel) took turns on nothing: on a fresh machine swift.sh's
// apt-get failed with "Could not get lock /var/lib/apt/lists/lock. It is held
// by process 8147 (apt-get)" while rabbitmq.sh's was running. apt_install
// must take turns, and the second must see what the first installed.
// apt-get, dpkg and sudo are fakes on PATH: apt-get fails as the real one
// does when another is running, and "installs" by writing a file.
func TestAptInstallTakesTurns(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := map[string]string{
		// dpkg -s PKG: installed when $FAKE/installed/PKG exists.
		"dpkg": `[ "$1" = -s ] && [ -e "$FAKE/installed/$2" ]`,
		"sudo": `exec "$@"`,
		// apt-get: one at a time, like apt's own lock; install writes the files.
		"apt-get": `set -o noclobber
if ! { echo $$ > "$FAKE/apt.lock"; } 2>/dev/null; then
  echo "E: Could not get lock $FAKE/apt.lock. It is held by process $(cat "$FAKE/apt.lock") (apt-get)" >&2; exit 100
fi
trap 'rm -f "$FAKE/apt.lock"' EXIT
echo "$*" >> "$FAKE/calls"
sleep 0.3
for a in "$@"; do case $a in -*|install|update|DPkg::*) ;; *) mkdir -p "$FAKE/installed"; : > "$FAKE/installed/$a" ;; esac; done`,
	}
	for name, body := range fake {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lib, err := filepath.Abs("lib.sh")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+bin+":"+os.Getenv("PATH"),
		"FAKE="+dir,
		"DBCANARY_STACK_DIR="+filepath.Join(dir, "stack"),
		"DBCANARY_APT_LOCK="+filepath.Join(dir, "dbcanary-apt.lock"))
	var wg sync.WaitGroup
	out := make([]string, 3)
	errs := make([]error, 3)
	for i, pkgs := range []string{"swift memcached", "rabbitmq-server", "swift rabbitmq-server"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("bash", "-c", `source "$1"; apt_install $2`, "-", lib, pkgs)
			cmd.Env = env
			b, err := cmd.CombinedOutput()
			out[i], errs[i] = string(b), err
		}()
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil {
			t.Errorf("apt_install %d: %v\n%s", i, errs[i], out[i])
		}
	}
	for _, p := range []string{"swift", "memcached", "rabbitmq-server"} {
		if _, err := os.Stat(filepath.Join(dir, "installed", p)); err != nil {
			t.Errorf("%s not installed: %v", p, err)
		}
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	installs := map[string]int{}
	for _, l := range strings.Split(string(calls), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[2] == "install" {
			for _, p := range f[3:] {
				if !strings.HasPrefix(p, "-") {
					installs[p]++
				}
			}
		}
	}
	for p, n := range installs {
		if n > 1 {
			t.Errorf("%s installed %d times: the later script should have found it installed once it held the lock:\n%s", p, n, calls)
		}
	}
}
