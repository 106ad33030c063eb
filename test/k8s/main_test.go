//go:build integration

package k8s

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/dbcanary/dbcanary/test/stack"
)

// The image the tests run: `make image`'s build (deploy/image/build.sh) of
// this tree, imported into the node's containerd; pullPolicy Never proves no
// registry is asked.
const (
	imageRepo = "localhost/dbcanary"
	imageTag  = "k8s-test"
	// standinImage is the stand-in application container beside the sidecar:
	// the node's own pause image (k8s.sh builds it FROM scratch).
	standinImage = "registry.k8s.io/pause:3.10"
	// operatorModule holds the CRDs of ServiceMonitor, PodMonitor,
	// PrometheusRule and AlertmanagerConfig (example/prometheus-operator-crd).
	operatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// Set by TestMain.
var (
	helmBin    string
	cluster    stack.Env // k8s.sh env
	minio      stack.Env // minio.sh env
	s3Endpoint string    // MinIO as the pods reach it: the forwarder on the bridge's gateway
	toxi       *toxiproxy.Client
	startTook  time.Duration // k8s.sh start: node Ready
	imageTook  time.Duration // the image built and imported
)

func TestMain(m *testing.M) {
	if os.Getenv("DBCANARY_K8S") != "1" {
		fmt.Println("test/k8s: no test run: the Kubernetes tests run with DBCANARY_K8S=1 (make test-k8s), see docs/evidence/kubernetes.md")
		os.Exit(0)
	}
	helmBin = stack.MustTool("helm")
	t0 := time.Now()
	cluster = stack.Must("k8s")
	startTook = time.Since(t0)
	minio = stack.Must("minio")

	t0 = time.Now()
	binary, remove := stack.MustBuild("dbcanary-k8s-")
	img := imageRepo + ":" + imageTag
	must("make image", exec.Command("bash", filepath.Join(stack.RepoRoot(), "deploy/image/build.sh"), binary, img))
	must("k8s.sh import", exec.Command("bash", filepath.Join(stack.Dir(), "k8s.sh"), "import", img))
	imageTook = time.Since(t0)

	crds, err := operatorCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/k8s:", err)
		os.Exit(1)
	}
	must("kubectl apply CRDs", kubectlCmd("apply", "--server-side", "-f", crds))

	stopToxi := mustForwarder()
	stack.Exit(m.Run(), remove, stopToxi)
}

// must runs cmd or exits the test binary with its output.
func must(what string, cmd *exec.Cmd) {
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "test/k8s: %s: %v\n%s", what, err, out)
		os.Exit(1)
	}
}

// operatorCRDs downloads prometheus-operator's module (no build) and returns
// its CRD directory.
func operatorCRDs() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", operatorModule)
	cmd.Dir = os.TempDir() // outside this module: no go.mod change
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v", operatorModule, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == `"Dir"` {
			dir := strings.Trim(strings.TrimSpace(v), `",`)
			return filepath.Join(dir, "example", "prometheus-operator-crd"), nil
		}
	}
	return "", fmt.Errorf("go mod download %s: no Dir in %s", operatorModule, out)
}

// mustForwarder starts a toxiproxy of the package's own (API on a free
// loopback port) with one proxy on the bridge's gateway address to MinIO on
// 127.0.0.1: the only way pods reach the store, and one a test can cut.
func mustForwarder() (stop func()) {
	if out, err := stack.Script("toxiproxy", "install"); err != nil {
		fmt.Fprintf(os.Stderr, "test/k8s: toxiproxy.sh install: %v\n%s", err, out)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "dbcanary-k8s-toxiproxy-")
	if err == nil {
		err = os.Symlink(filepath.Join(stack.DataDir(), "bin"), filepath.Join(dir, "bin"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/k8s:", err)
		os.Exit(1)
	}
	port := freeLoopbackPort()
	script := func(action string) *exec.Cmd {
		cmd := exec.Command("bash", filepath.Join(stack.Dir(), "toxiproxy.sh"), action)
		cmd.Env = append(os.Environ(), "DBCANARY_STACK_DIR="+dir, "DBCANARY_TOXIPROXY_PORT="+strconv.Itoa(port))
		return cmd
	}
	must("toxiproxy.sh start", script("start"))
	stop = func() {
		if out, err := script("stop").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "test/k8s: toxiproxy.sh stop: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	}
	toxi = toxiproxy.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	// Port 0: toxiproxy picks a free one on the gateway address and says which.
	proxy, err := toxi.CreateProxy("minio", net.JoinHostPort(cluster["DBCANARY_K8S_GATEWAY"], "0"), minio["DBCANARY_TEST_S3_ENDPOINT"])
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "test/k8s: toxiproxy minio proxy:", err)
		os.Exit(1)
	}
	s3Endpoint = proxy.Listen
	return stop
}

// freeLoopbackPort is a port free now on 127.0.0.1 for a server TestMain
// starts, above the kernel's default ephemeral range (32768-60999) so that no
// outgoing connection takes it first (stack.FreePort's reasoning; it needs a t).
func freeLoopbackPort() int {
	for port := 61000 + os.Getpid()%3000; port < 65500; port += 7 {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			_ = l.Close()
			return port
		}
	}
	fmt.Fprintln(os.Stderr, "test/k8s: no free port in 61000-65500 on 127.0.0.1")
	os.Exit(1)
	return 0
}
