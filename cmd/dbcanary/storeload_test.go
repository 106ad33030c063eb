package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCheckConfigLoad: check-config prints each target's load from its ops'
// payload estimates at the configured rates, and the instance's total.
func TestCheckConfigLoad(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("canary-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, `
global: {instance_id: load-test}
targets:
  - name: objects
    backend: s3
    ops: {put_1MiB: {rate: 1}, get_1MiB: {rate: 0.5}, head_1MiB: {rate: 0.5}, delete_1MiB: {rate: 0}, list: {rate: 0}}
    s3: {endpoint: "http://127.0.0.1:1", sizes: [1MiB], access_key_id_file: `+key+`, secret_access_key_file: `+key+`}
  - name: queue
    backend: rabbitmq
    ops: {publish: {rate: 2}}
    rabbitmq: {url: "amqp://127.0.0.1:1/", username: canary, password_file: `+key+`, message_size: 2048}
`)
	code, out, errOut := run(t, "check-config", "--config.file", cfg)
	if code != 0 {
		t.Fatalf("check-config: %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"  objects (s3): 2.00 ops/s, 1.0 MiB/s to the store, 512.0 KiB/s from it\n",
		// consume (async) follows publish: not an op of its own, its bytes are publish's
		"  queue (rabbitmq): 2.00 ops/s, 4.0 KiB/s to the store, 4.0 KiB/s from it\n",
		"  this instance: 4.00 ops/s, 1.0 MiB/s to the stores, 516.0 KiB/s from them",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check-config output lacks %q:\n%s", want, out)
		}
	}
}

// TestLightSidecarLoad runs check-config on the light sidecar setting of
// docs/load.md (its secrets paths pointed at files of the test) and holds the
// instance's estimated load under 10 KiB/s each way.
func TestLightSidecarLoad(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "load.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- light-sidecar")
	if !ok {
		t.Fatal("docs/load.md has no light-sidecar block")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/load.md: the light-sidecar yaml block is not closed")
	}
	dir := t.TempDir()
	for _, f := range []string{"s3/access-key-id", "s3/secret-access-key", "rabbitmq/password"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeConfig(t, dir, "global: {instance_id: light}\n"+strings.ReplaceAll(block, "/etc/dbcanary/secrets/", dir+"/"))
	code, out, errOut := run(t, "check-config", "--config.file", cfg)
	if code != 0 {
		t.Fatalf("check-config on the documented light setting: %d\n%s\n%s", code, out, errOut)
	}
	m := regexp.MustCompile(`this instance: [0-9.]+ ops/s, ([0-9.]+) (B|KiB|MiB)/s to the stores, ([0-9.]+) (B|KiB|MiB)/s from them`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no instance load line:\n%s", out)
	}
	for _, i := range []int{1, 3} {
		v, _ := strconv.ParseFloat(m[i], 64)
		if m[i+1] == "MiB" || (m[i+1] == "KiB" && v >= 10) {
			t.Errorf("the light sidecar setting costs %s %s/s, want under 10 KiB/s:\n%s", m[i], m[i+1], out)
		}
	}
	t.Logf("%s", out)
}
