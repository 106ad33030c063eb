//go:build integration

// Package upgrade proves an in-place upgrade loses nothing: the previous
// release, built by the test from the repository's own history, runs against
// the real stores with the durability ledger on and a state directory, is
// stopped (SIGTERM, or kill -9) and replaced by the binary of this tree on
// the same state directory, which must read every state file the previous
// release wrote, carry on its ledger's history (entries and the ages they were
// already checked at) and report no loss (docs/ledger.md#upgrades).
package upgrade

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// previousRelease is the last commit before the refactor that moved the
// durability ledger from internal/ledger into package probes (6c78d8c, merged
// by 6cad9d3, branched from here): the on-disk format must have survived the move.
const previousRelease = "06436ae2f53282e3821566e56b6444eba8537c2e"

var (
	newBinary, oldBinary string
	// skipped says why oldBinary could not be built when the commit is not in
	// this clone's history (a shallow clone).
	skipped string
	envs    = map[string]stack.Env{}
)

// backends are the stores the upgrade runs against: every backend with a ledger.
var backends = []string{"cassandra", "rabbitmq", "minio", "opensearch"}

func TestMain(m *testing.M) {
	bin, removeNew := stack.MustBuild("dbcanary-upgrade-new-")
	newBinary = bin
	old, err := releaseBinary(previousRelease)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/upgrade:", err)
		removeNew()
		os.Exit(1)
	}
	oldBinary = old
	for _, b := range backends {
		envs[b] = stack.Must(b)
	}
	stack.Exit(m.Run(), removeNew)
}

// releaseBinary returns cmd/dbcanary as of commit, built once per machine and
// Go version and cached in the stack's bin directory as the servers are
// (the first build ~1 minute: the project's packages as of then; the modules
// come from the build cache). A commit missing from this clone's history
// returns "" and says why in skipped; any other failure is an error.
func releaseBinary(commit string) (string, error) {
	root := stack.RepoRoot()
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		skipped = fmt.Sprintf("commit %s (the previous release) is not in this clone's history (a shallow clone? `git fetch --unshallow`): %v %s",
			commit[:7], err, strings.TrimSpace(string(out)))
		return "", nil
	}
	bin := filepath.Join(stack.DataDir(), "bin")
	cached := filepath.Join(bin, "dbcanary-"+commit[:12]+"-"+runtime.Version())
	if fi, err := os.Stat(cached); err == nil && fi.Mode()&0o111 != 0 {
		return cached, nil
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	src, err := os.MkdirTemp("", "dbcanary-upgrade-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	t0 := time.Now()
	// git archive: the commit's tree as it was, without touching this clone (no worktree to remove).
	archive := exec.Command("bash", "-c", `set -o pipefail; git -C "$1" archive "$2" | tar -x -C "$3"`, "bash", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v\n%s", commit[:7], err, out)
	}
	tmp := fmt.Sprintf("%s.tmp%d", cached, os.Getpid())
	build := exec.Command("go", "build", "-o", tmp, "./cmd/dbcanary")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/dbcanary at %s: %v\n%s", commit[:7], err, out)
	}
	if err := os.Rename(tmp, cached); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "test/upgrade: built %s in %s\n", cached, time.Since(t0).Round(100*time.Millisecond))
	return cached, nil
}
