package stack

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
)

// The helpers below are the ones every integration package needs around the
// servers: building the daemon once for a TestMain, running it for a test,
// a free loopback port, and a crash (kill -9) of a server the test started.

// MustBuild builds cmd/dbcanary as `make build` does (CGO_ENABLED=0: a
// static binary), with more go build flags if given (e.g. "-trimpath",
// "-ldflags", "-X ..."), into a new temporary directory for a package's
// TestMain, and returns the binary and a function removing it; it exits the
// process when the build fails (no test of the package can run).
func MustBuild(prefix string, flags ...string) (binary string, remove func()) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "dbcanary")
	build := exec.Command("go", append(append([]string{"build"}, flags...), "-o", binary, "./cmd/dbcanary")...)
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/dbcanary: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	return binary, func() { _ = os.RemoveAll(dir) }
}

// DataDir is the stack's directory of servers, binaries and artefacts:
// $DBCANARY_STACK_DIR, /var/tmp/dbcanary-stack by default (as test/stack/lib.sh).
func DataDir() string {
	if d := os.Getenv("DBCANARY_STACK_DIR"); d != "" {
		return d
	}
	return "/var/tmp/dbcanary-stack"
}

// MustArtefactDir creates and returns the directory a package keeps its
// screenshots, reports and logs in: $DBCANARY_ARTEFACT_DIR, or
// <DataDir>/artefacts/<name>-<UTC time>; it exits the process on failure.
func MustArtefactDir(name string) string {
	dir := os.Getenv("DBCANARY_ARTEFACT_DIR")
	if dir == "" {
		dir = filepath.Join(DataDir(), "artefacts", name+"-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return dir
}

// Exit ends a package's TestMain: it runs cleanups, stops the backends the
// package started (Cleanup) and exits with code, m.Run's result.
func Exit(code int, cleanups ...func()) {
	for _, c := range cleanups {
		c()
	}
	Cleanup()
	os.Exit(code)
}

// FreePort returns a TCP port free on 127.0.0.1 for a server the test
// starts. It is taken above the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default; below it if there
// is no room above): a port the kernel handed out with ":0" is in that range,
// and any outgoing connection of any process may take it before the server
// binds it (seen once in CI: a private Cassandra's port "taken by another
// process"). A reservation file (O_EXCL, in the temp dir, reclaimed after
// an hour) keeps two test processes from picking the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := portRange()
	for range 200 {
		port := lo + portRand.IntN(hi-lo+1)
		if !reservePort(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	t.Fatalf("no free port in %d-%d on 127.0.0.1 after 200 tries", lo, hi)
	return 0
}

// FreeAddr is 127.0.0.1:<FreePort>.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

var portRand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))

// portRange is where FreePort picks: above the ephemeral range if it leaves
// 1000 ports there, else the 5000 below it.
func portRange() (lo, hi int) {
	elo, ehi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			z, errZ := strconv.Atoi(f[1])
			if errA == nil && errZ == nil && a > 0 && z >= a {
				elo, ehi = a, z
			}
		}
	}
	if 65535-ehi >= 1000 {
		return ehi + 1, 65535
	}
	return max(elo-5000, 1024), elo - 1
}

// reservePort claims port for this process with a file created O_EXCL; a
// claim older than an hour is stale and taken over.
func reservePort(port int) bool {
	dir := filepath.Join(os.TempDir(), "dbcanary-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true // no reservation possible: the bind check alone decides
	}
	path := filepath.Join(dir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
			_ = f.Close()
			return true
		}
		fi, serr := os.Stat(path)
		if serr != nil || time.Since(fi.ModTime()) < time.Hour {
			return false
		}
		_ = os.Remove(path)
	}
	return false
}

// Log is a buffer a process writes and a test reads at the same time.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Daemon is `dbcanary run` started by a test.
type Daemon struct {
	// Addr is the web listen address, 127.0.0.1:PORT.
	Addr string
	// Log holds the daemon's standard output and error.
	Log *Log
	// Cmd is the running process.
	Cmd *exec.Cmd
}

// DaemonOptions are the settings of StartDaemon beyond the config file.
type DaemonOptions struct {
	// Args are more flags after --config.file, --web.listen-address and
	// --shutdown.grace-period 2s (a flag given again wins).
	Args []string
	// Env is the process environment (nil: the test's).
	Env []string
	// NoWait returns at once instead of waiting until /-/ready answers 200
	// (for a daemon expected to fail at start).
	NoWait bool
	// OnStop runs after the daemon has exited at the test's end, e.g. to
	// keep its log as an artefact; the log is printed if the test failed.
	OnStop func(log []byte)
	// Addr is the web listen address ("": a free port on 127.0.0.1): a
	// daemon started again on it keeps its Prometheus scrape target.
	Addr string
}

// StartDaemon runs binary `run --config.file cfg` on a free port until the
// test ends (SIGTERM, then SIGKILL after 30 s, which fails the test) and, unless
// o.NoWait, waits up to 60 s until it is ready. Its log is printed if the test
// failed.
func StartDaemon(t testing.TB, binary, cfg string, o DaemonOptions) *Daemon {
	t.Helper()
	d := &Daemon{Addr: o.Addr, Log: &Log{}}
	if d.Addr == "" {
		d.Addr = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	}
	// A short grace period: at the test's end in-flight ops against a store
	// the test killed would otherwise hold the stop for 10 s.
	d.Cmd = exec.Command(binary, append([]string{"run", "--config.file", cfg, "--web.listen-address", d.Addr, "--shutdown.grace-period", "2s"}, o.Args...)...)
	d.Cmd.Env = o.Env
	d.Cmd.Stdout, d.Cmd.Stderr = d.Log, d.Log
	if err := d.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = d.Cmd.Process.Kill()
			<-exited
			t.Error("dbcanary did not stop within 30 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("dbcanary log:\n%s", d.Log.String())
		}
		if o.OnStop != nil {
			o.OnStop([]byte(d.Log.String()))
		}
	})
	if !o.NoWait {
		enginetest.WaitFor(t, 60*time.Second, "dbcanary to be ready on "+d.Addr, func() bool {
			resp, err := http.Get("http://" + d.Addr + "/-/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	return d
}

// PIDFile reads the process id a server's pid file holds.
func PIDFile(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("%s: no process id in %q", path, b)
	}
	return pid
}

// Kill9 kills a server the test started (not a child of the test process:
// the stack scripts daemonise them) with SIGKILL — no drain, no flush, no
// final sync: a crash — and waits up to 30 s until it is gone.
func Kill9(t testing.TB, pid int, what string) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s (pid %d): %v", what, pid, err)
	}
	enginetest.WaitFor(t, 30*time.Second, fmt.Sprintf("%s (pid %d) to exit after kill -9", what, pid), func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// LoadAverage is the machine's 1-minute load average (-1 if unknown): the
// suites share their cores, and latency alerts are sensitive to that.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return -1
	}
	return l
}
