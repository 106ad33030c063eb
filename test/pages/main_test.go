//go:build integration

package pages

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"testing"

	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

// Servers come from test/stack/*.sh, so their ports and directories follow
// the scripts' environment (DBCANARY_STACK_DIR, DBCANARY_<SERVER>_PORT, ...):
// `make test` uses the defaults, a run beside a shared stack sets its own
// (docs/page-quality.md). Prometheus and Alertmanager are started by the
// suite itself on free ports, with its own config; these are the binaries
// prometheus.sh and alertmanager.sh install. PAGES_PROMETHEUS_BIN runs the
// suite on another Prometheus (make test-compat-pages-prometheus3: the 3.x
// test/tools/prometheus3.sh builds).
const alertmanagerBin = "/usr/bin/prometheus-alertmanager"

var prometheusBin = cmp.Or(os.Getenv("PAGES_PROMETHEUS_BIN"), "/usr/bin/prometheus")

// backendScripts are the stack scripts of the probed servers, by dbcanary backend.
var backendScripts = map[string]string{
	"cassandra":  "cassandra",
	"opensearch": "opensearch",
	"rabbitmq":   "rabbitmq",
	"s3":         "minio",
}

var (
	envs      = map[string]stack.Env{} // by script name
	daemonBin string                   // the dbcanary binary under test
)

// everyBackend lists every registered backend that has a board (so alerts
// that page), sorted: the suite probes each. A new backend stops TestMain
// until backendScripts (and daemon.addTarget) know it.
func everyBackend() ([]string, error) {
	var out []string
	for _, name := range probes.Names() {
		if be, _ := probes.Lookup(name); be.Facts.NoBoard {
			continue
		}
		if _, ok := backendScripts[name]; !ok {
			return nil, fmt.Errorf("backend %s has no stack script in backendScripts (test/pages/main_test.go)", name)
		}
		out = append(out, name)
	}
	return out, nil
}

func TestMain(m *testing.M) {
	backends, err := everyBackend()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pages:", err)
		os.Exit(1)
	}
	envs["toxiproxy"] = stack.Must("toxiproxy")
	for _, b := range backends {
		envs[backendScripts[b]] = stack.Must(backendScripts[b])
	}
	for _, s := range []string{"prometheus", "alertmanager"} {
		if _, err := stack.Script(s, "install"); err != nil {
			fmt.Fprintln(os.Stderr, "pages:", err)
			os.Exit(1)
		}
	}
	// The real binary, as `make build` makes it (a temp path: bin/ is shared).
	t0 := time.Now()
	var remove func()
	daemonBin, remove = stack.MustBuild("dbcanary-pages-bin-", "-trimpath")
	fmt.Fprintf(os.Stderr, "pages: built %s in %s\n", daemonBin, time.Since(t0).Round(time.Second))
	stack.Exit(m.Run(), remove)
}
