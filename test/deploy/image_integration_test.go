//go:build integration

package deploy

// The image `make image` builds (deploy/image/Containerfile), built here by
// podman and run against the local MinIO the way a pod runs it: non-root,
// read-only root filesystem, config and secrets mounted read-only.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbcanary/dbcanary/test/stack"
)

// imageUID is the image's user (deploy/image/rootfs.sh).
const imageUID = 65532

var (
	podmanOnce sync.Once
	podmanConf string
	podmanErr  error
)

// podman runs podman with the settings test/tools/podman.sh installs and
// prints (CONTAINERS_CONF: runc, cgroupfs, no default ulimits).
func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	podmanOnce.Do(func() {
		out, err := exec.Command("bash", filepath.Join(repoRoot, "test", "tools", "podman.sh"), "env").Output()
		if err != nil {
			podmanErr = fmt.Errorf("test/tools/podman.sh env: %v", err)
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export CONTAINERS_CONF="); ok {
				podmanConf = v
			}
		}
		if podmanConf == "" {
			podmanErr = fmt.Errorf("test/tools/podman.sh env printed no CONTAINERS_CONF: %q", out)
		}
	})
	if podmanErr != nil {
		t.Fatal(podmanErr)
	}
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+podmanConf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if args[0] == "logs" {
		// podman logs writes the container's stderr (dbcanary's log) to its own.
		out = append(out, stderr.Bytes()...)
	}
	return strings.TrimSpace(string(out)), nil
}

func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podman(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// imageTestPort returns a port nothing listens on now on 127.0.0.1.
func imageTestPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startMinIO starts the stack's MinIO (test/stack/minio.sh) and stops it
// after the test if this test started it, unless DBCANARY_STACK_KEEP=1.
func startMinIO(t *testing.T) stack.Env {
	t.Helper()
	running := exec.Command("bash", filepath.Join(stack.Dir(), "minio.sh"), "status").Run() == nil
	env, err := stack.Start("minio")
	if err != nil {
		t.Fatal(err)
	}
	if !running && os.Getenv("DBCANARY_STACK_KEEP") != "1" {
		t.Cleanup(func() {
			if err := stack.Stop("minio"); err != nil {
				t.Log(err)
			}
		})
	}
	return env
}

// buildImage builds the image from the binary `make build` makes, with the
// script `make image` runs, under a tag of this test's own.
func buildImage(t *testing.T) string {
	t.Helper()
	tag := fmt.Sprintf("localhost/dbcanary-image-test:%d", os.Getpid())
	t0 := time.Now()
	cmd := exec.Command("bash", filepath.Join(repoRoot, "deploy", "image", "build.sh"), dbcanary(t), tag)
	cmd.Env = append(os.Environ(), "VERSION=image-test", "REVISION=0123456789abcdef")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image/build.sh: %v\n%s", err, out)
	}
	took := time.Since(t0)
	t.Cleanup(func() {
		if _, err := podman(t, "rmi", "--force", tag); err != nil {
			t.Error(err)
		}
	})
	size, err := strconv.ParseInt(mustPodman(t, "image", "inspect", "--format", "{{.Size}}", tag), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	stack.Figure(t, "image %s: %.1f MB, built by podman in %s from the binary", tag, float64(size)/1e6, took.Round(100*time.Millisecond))
	return tag
}

// dockerfileImage builds the Dockerfile's final stage, as written, on a
// stand-in for its build stage (golang:1.26-bookworm needs a registry): a
// scratch stage holding what the real one leaves at the paths the final stage
// copies from (/src/bin/dbcanary, and /image/rootfs from rootfs.sh).
func dockerfileImage(t *testing.T) string {
	t.Helper()
	df, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(string(df), "\nFROM ")
	if i < 0 {
		t.Fatal("the Dockerfile has no final FROM")
	}
	ctx := t.TempDir()
	if out, err := exec.Command("bash", filepath.Join(repoRoot, "deploy", "image", "rootfs.sh"), filepath.Join(ctx, "image", "rootfs")).CombinedOutput(); err != nil {
		t.Fatalf("rootfs.sh: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(dbcanary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ctx, "src", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "src", "bin", "dbcanary"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ctx, "Dockerfile.final")
	stage := "FROM scratch AS build\nCOPY image/ /image/\nCOPY src/ /src/\n" + string(df[i+1:])
	if err := os.WriteFile(file, []byte(stage), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("localhost/dbcanary-dockerfile-test:%d", os.Getpid())
	mustPodman(t, "build", "--quiet", "--pull=never", "--layers=false", "-f", file,
		"--build-arg", "VERSION=image-test", "--build-arg", "REVISION=0123456789abcdef", "-t", tag, ctx)
	t.Cleanup(func() {
		if _, err := podman(t, "rmi", "--force", tag); err != nil {
			t.Error(err)
		}
	})
	return tag
}

// imageConfig is the part of an image's config both recipes must agree on.
type imageConfig struct {
	User         string
	Entrypoint   []string
	Cmd          []string
	ExposedPorts map[string]struct{}
	Labels       map[string]string
}

func inspectImageConfig(t *testing.T, tag string) imageConfig {
	t.Helper()
	var cfg imageConfig
	inspectJSON(t, mustPodman(t, "image", "inspect", "--format", "{{json .Config}}", tag), &cfg)
	delete(cfg.Labels, "io.buildah.version")
	return cfg
}

// fileSummary is a file of an image as the comparison sees it.
func fileSummary(h *tar.Header) string {
	return fmt.Sprintf("%c %o %d:%d %d", h.Typeflag, h.Mode&0o7777, h.Uid, h.Gid, h.Size)
}

// imageFiles lists the image's files (a created, never started container's
// export: nothing a runtime adds).
func imageFiles(t *testing.T, tag string) map[string]*tar.Header {
	t.Helper()
	name := fmt.Sprintf("dbcanary-image-files-%d", os.Getpid())
	mustPodman(t, "create", "--name", name, tag)
	defer func() {
		if _, err := podman(t, "rm", "--force", name); err != nil {
			t.Error(err)
		}
	}()
	export := filepath.Join(t.TempDir(), "rootfs.tar")
	mustPodman(t, "export", "--output", export, name)
	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = h
	}
	return files
}

// TestImage builds the image and runs it as a pod would: non-root,
// read-only root filesystem, all capabilities dropped, config and S3
// credentials mounted read-only, against the local MinIO. The Dockerfile's
// final stage, built on a stand-in build stage, gives the same image.
func TestImage(t *testing.T) {
	s3 := startMinIO(t)
	tag := buildImage(t)

	// The image: the binary, the CA bundle, passwd/group, and nothing else.
	files := imageFiles(t, tag)
	var names []string
	for n, h := range files {
		if h.Typeflag != tar.TypeDir {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	want := []string{"etc/group", "etc/passwd", "etc/ssl/certs/ca-certificates.crt", "usr/local/bin/dbcanary"}
	if !slices.Equal(names, want) {
		t.Errorf("image files %v, want %v", names, want)
	}
	if h := files["usr/local/bin/dbcanary"]; h != nil && (h.Mode&0o111 == 0 || h.Uid != 0) {
		t.Errorf("/usr/local/bin/dbcanary mode %o uid %d, want executable and owned by root (not writable by the process)", h.Mode, h.Uid)
	}
	cfg := inspectImageConfig(t, tag)
	if cfg.User != "65532:65532" || !slices.Equal(cfg.Entrypoint, []string{"/usr/local/bin/dbcanary"}) ||
		!slices.Equal(cfg.Cmd, []string{"run", "--config.file=/etc/dbcanary/dbcanary.yaml"}) {
		t.Errorf("image config user %q entrypoint %q cmd %q", cfg.User, cfg.Entrypoint, cfg.Cmd)
	}
	if cfg.Labels["org.opencontainers.image.version"] != "image-test" || cfg.Labels["org.opencontainers.image.revision"] != "0123456789abcdef" {
		t.Errorf("image labels %v: version and revision not from VERSION and REVISION", cfg.Labels)
	}

	// The Dockerfile's final stage makes the same image: same files (mode,
	// owner, size), same config.
	docker := dockerfileImage(t)
	dfiles := imageFiles(t, docker)
	for name, h := range files {
		if d, ok := dfiles[name]; !ok {
			t.Errorf("the Dockerfile's image lacks %s", name)
		} else if fileSummary(d) != fileSummary(h) {
			t.Errorf("%s: Dockerfile's image %s, Containerfile's %s", name, fileSummary(d), fileSummary(h))
		}
	}
	for name := range dfiles {
		if _, ok := files[name]; !ok {
			t.Errorf("the Dockerfile's image has %s, the Containerfile's has not", name)
		}
	}
	if dcfg := inspectImageConfig(t, docker); !reflect.DeepEqual(dcfg, cfg) {
		t.Errorf("image config: Dockerfile's %+v, Containerfile's %+v", dcfg, cfg)
	}

	// Config and secrets as a pod mounts them: files readable by 65532 only.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(dir, "secrets")
	if err := os.Mkdir(secrets, 0o755); err != nil {
		t.Fatal(err)
	}
	var secretValues []string
	for file, key := range map[string]string{"access_key_id": "DBCANARY_TEST_S3_ACCESS_KEY_FILE", "secret_access_key": "DBCANARY_TEST_S3_SECRET_KEY_FILE"} {
		b, err := os.ReadFile(s3.Get(t, key))
		if err != nil {
			t.Fatal(err)
		}
		secretValues = append(secretValues, strings.TrimSpace(string(b)))
		p := filepath.Join(secrets, file)
		if err := os.WriteFile(p, b, 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, imageUID, imageUID); err != nil {
			t.Fatal(err)
		}
	}
	const target = "s3-image"
	config := fmt.Sprintf(`global:
  timeout: 10s
targets:
  - name: %s
    backend: s3
    ops:
      put_4KiB: {rate: 2}
      get_4KiB: {rate: 2}
    s3:
      endpoint: http://%s
      region: %s
      bucket: dbcanary-image-test
      sizes: [4KiB]
      access_key_id_file: /etc/dbcanary/secrets/access_key_id
      secret_access_key_file: /etc/dbcanary/secrets/secret_access_key
`, target, s3.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), s3.Get(t, "DBCANARY_TEST_S3_REGION"))
	if err := os.WriteFile(filepath.Join(dir, "dbcanary.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	port := imageTestPort(t)
	name := fmt.Sprintf("dbcanary-image-test-%d", os.Getpid())
	t.Cleanup(func() {
		if logs, err := podman(t, "logs", name); err == nil {
			for _, s := range secretValues {
				if strings.Contains(logs, s) {
					t.Error("the container's log holds an S3 credential")
				}
			}
			if !strings.Contains(logs, target) {
				t.Errorf("the container's debug log never names the target %s: is it captured?", target)
			}
			if t.Failed() {
				t.Logf("container log:\n%s", logs)
			}
		}
		if _, err := podman(t, "rm", "--force", name); err != nil {
			t.Error(err)
		}
	})
	// The CMD is replaced to listen on a free loopback port (host network) and
	// to log at debug level (more text in which no secret may appear).
	mustPodman(t, "run", "--detach", "--name", name, "--network", "host",
		"--read-only", "--user", strconv.Itoa(imageUID), "--cap-drop", "all", "--security-opt", "no-new-privileges",
		"--env", "DBCANARY_INSTANCE_ID=image-test",
		"--volume", filepath.Join(dir, "dbcanary.yaml")+":/etc/dbcanary/dbcanary.yaml:ro",
		"--volume", secrets+":/etc/dbcanary/secrets:ro",
		tag, "run", "--config.file=/etc/dbcanary/dbcanary.yaml", "--log.level=debug", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	// The process: uid/gid 65532, no capabilities, root filesystem read-only.
	pid := mustPodman(t, "inspect", "--format", "{{.State.Pid}}", name)
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatalf("the container's process %s: %v", pid, err)
	}
	for _, field := range []string{"Uid", "Gid"} {
		if ids := procField(string(status), field); len(ids) != 4 || slices.ContainsFunc(ids, func(id string) bool { return id != strconv.Itoa(imageUID) }) {
			t.Errorf("process %s: %s %v, want %d everywhere", pid, field, ids, imageUID)
		}
	}
	if capEff := procField(string(status), "CapEff"); len(capEff) != 1 || strings.Trim(capEff[0], "0") != "" {
		t.Errorf("process %s: CapEff %v, want none", pid, capEff)
	}
	top := strings.Split(mustPodman(t, "top", name, "huser", "user"), "\n")
	if len(top) != 2 || !slices.Equal(strings.Fields(top[1]), []string{strconv.Itoa(imageUID), "nonroot"}) {
		t.Errorf("podman top:\n%s\nwant one process, as %d (nonroot)", strings.Join(top, "\n"), imageUID)
	}
	mountinfo, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if opts, ok := rootMountOptions(string(mountinfo)); !ok || !slices.Contains(strings.Split(opts, ","), "ro") {
		t.Errorf("the container's / is mounted %q, want ro", opts)
	}

	// /metrics: the S3 target's puts and gets succeed (generous deadline: a
	// loaded machine, a cold MinIO bucket).
	var last string
	ok := waitImage(t, 3*time.Minute, func() bool {
		fams, err := scrapeImage(base + "/metrics")
		if err != nil {
			last = err.Error()
			return false
		}
		put, get := imageOpCount(fams, target, "put_4KiB", "ok"), imageOpCount(fams, target, "get_4KiB", "ok")
		last = fmt.Sprintf("ok puts %v, ok gets %v", put, get)
		return put > 0 && get > 0
	})
	if !ok {
		t.Fatalf("the S3 target's ops did not succeed: %s", last)
	}
	for _, op := range []string{"put_4KiB", "get_4KiB"} {
		fams, err := scrapeImage(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if n := imageOpCount(fams, target, op, "error"); n > 0 {
			t.Errorf("%s: %v failed ops", op, n)
		}
	}

	// The status page.
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), target) {
		t.Errorf("GET /: %s %q, body names %s: %v", resp.Status, resp.Header.Get("Content-Type"), target, strings.Contains(string(body), target))
	}

	// SIGTERM (podman stop; SIGKILL only after 60 s) ends it cleanly: exit 0.
	t0 := time.Now()
	mustPodman(t, "stop", "--time", "60", name)
	took := time.Since(t0)
	state := mustPodman(t, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name)
	if state != "exited 0" {
		t.Errorf("after podman stop: %q, want \"exited 0\" (SIGTERM handled, no SIGKILL)", state)
	}
	stack.Figure(t, "podman stop (SIGTERM) to exit 0 in %s", took.Round(10*time.Millisecond))
}

// inspectJSON decodes a podman inspect --format '{{json ...}}' output.
func inspectJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("podman inspect: %v\n%s", err, out)
	}
}

// procField returns the whitespace-separated values of a /proc/PID/status field.
func procField(status, field string) []string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.Fields(v)
		}
	}
	return nil
}

// rootMountOptions returns the mount options of / in a /proc/PID/mountinfo.
func rootMountOptions(mountinfo string) (string, bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return f[5], true
		}
	}
	return "", false
}

func scrapeImage(url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Ask for the text format: the parser below reads no protobuf.
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// imageOpCount is the sample count of dbcanary_op_latency_seconds for a target, op and result.
func imageOpCount(fams map[string]*dto.MetricFamily, target, op, result string) uint64 {
	fam := fams["dbcanary_op_latency_seconds"]
	if fam == nil {
		return 0
	}
	var n uint64
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["target"] == target && labels["op"] == op && labels["result"] == result {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// waitImage polls cond until it holds or the deadline passes.
func waitImage(t *testing.T, deadline time.Duration, cond func() bool) bool {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}
