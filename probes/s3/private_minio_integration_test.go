//go:build integration

package s3

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/dbcanary/dbcanary/test/stack"
)

// privateMinio is a MinIO server of one test's own, on free ports with its
// own data directory, for tests that stop the server: the shared one on 9000
// serves every other package. It runs the binary test/stack/minio.sh cached.
type privateMinio struct {
	t                            *testing.T
	bin, data, addr, consoleAddr string
	user, password               string
	keyFile, secretFile          string
	cmd                          *exec.Cmd
	exited                       chan struct{}
}

func freeAddr(t *testing.T) string { t.Helper(); return stack.FreeAddr(t) }

func startPrivateMinio(t *testing.T) *privateMinio {
	t.Helper()
	stackDir := stack.DataDir()
	dir := t.TempDir()
	m := &privateMinio{
		t: t, bin: filepath.Join(stackDir, "bin", "minio"), data: filepath.Join(dir, "data"),
		addr: freeAddr(t), consoleAddr: freeAddr(t),
		user: fmt.Sprintf("private-%d", time.Now().UnixNano()%1e6), password: fmt.Sprintf("pw-%d-%d", os.Getpid(), time.Now().UnixNano()),
		keyFile: filepath.Join(dir, "key"), secretFile: filepath.Join(dir, "secret"),
	}
	if _, err := os.Stat(m.bin); err != nil {
		t.Fatalf("the MinIO binary test/stack/minio.sh builds: %v", err)
	}
	for f, v := range map[string]string{m.keyFile: m.user, m.secretFile: m.password} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m.start()
	t.Cleanup(m.stop)
	return m
}

func (m *privateMinio) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.bin, "server", m.data, "--address", m.addr, "--console-address", m.consoleAddr, "--quiet")
	m.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.user, "MINIO_ROOT_PASSWORD="+m.password, "MINIO_UPDATE=off", "MINIO_BROWSER=off")
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(m.cmd, m.exited)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + m.addr + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-m.exited:
			m.t.Fatalf("private MinIO on %s exited during startup", m.addr)
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("private MinIO on %s not ready after 60s", m.addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop stops the server by its PID (SIGTERM, then SIGKILL after 10 s).
func (m *privateMinio) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

func (m *privateMinio) client(t *testing.T) *minio.Client {
	t.Helper()
	c, err := minio.New(m.addr, &minio.Options{Creds: credentials.NewStaticV4(m.user, m.password, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (m *privateMinio) keys(t *testing.T, bucket string) []string {
	t.Helper()
	var keys []string
	for o := range m.client(t).ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", bucket, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}
