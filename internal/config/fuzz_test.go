package config

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/dbcanary/dbcanary/probes/all" // every backend section is fuzzed
)

// fuzzSeeds are complete, valid configs for every backend; the fuzzer mutates
// them (and the real files added in FuzzParse) into hostile ones.
var fuzzSeeds = []string{
	`global: {instance_id: fuzz-1, timeout: 2s, max_in_flight: 3, metrics: {histograms: full}}
targets:
  - name: mq
    backend: rabbitmq
    labels: {env: prod}
    ops: {publish: {rate: 0.5, timeout: 1s}, consume: {}}
    rabbitmq:
      url: amqps://127.0.0.1:5671/vhost
      username: dbcanary
      password_file: testdata/password
      queue_type: quorum
      tls: {enabled: true, server_name: mq.example}
`,
	`targets:
  - name: cass
    backend: cassandra
    ops: {"read*": {rate: 2}, insert: {rate: 1}}
    cassandra:
      hosts: ["127.0.0.1", "10.0.0.2:9043", "::1"]
      port: 9042
      local_dc: dc1
      username: cassandra
      password_env: HOME
      keyspace: dbcanary_fuzz
      replication: {class: NetworkTopologyStrategy, datacenters: {dc1: 3, dc2: 2}}
      consistency: {read: LOCAL_QUORUM, insert: local_one}
      mixed_workload: {a_size: {min: 1, max: 100}, b_size: {min: 5, max: 50}, recent_keys: 10}
  - name: ycsb
    backend: cassandra
    cassandra:
      hosts: [cassandra.example]
      profile: ycsb_a
      ttl: 10m
      ycsb_a: {record_count: 10, field_length: 5}
`,
	`targets:
  - name: os
    backend: opensearch
    timeout: 30s
    ops: {"*": {rate: 0.1}, visibility: {rate: 1, timeout: 40s}}
    opensearch:
      addresses: [http://127.0.0.1:9200, http://127.0.0.1:9201]
      username: admin
      password_file: testdata/password
      index_prefix: canary-
      replicas: 0
      refresh_interval: 200ms
      retention: 72h
      bulk_size: 5
      body_words: 20
`,
	`targets:
  - name: minio
    backend: s3
    max_in_flight: 2
    ops: {"get_*": {rate: 0.5}, list: {}}
    s3:
      endpoint: http://127.0.0.1:9000
      addressing: path
      bucket: dbcanary-fuzz
      prefix: canary/
      access_key_id_file: testdata/password
      secret_access_key_env: HOME
      sizes: [4KiB, 1MiB, 5000, 10B]
      multipart_threshold: 16MiB
      max_objects_per_size: 2
      lifecycle_expiry: false
`,
	`global: &g {timeout: 1s}
targets:
  - &n {name: a, backend: noop, noop: {delay: 1ms, failure_ratio: 0.5, failure_cause: timeout, payload_bytes: 10}}
  - {name: b, backend: noop, labels: {zone: "a"}, ops: {noop: {rate: 10000}}}
`,
}

// FuzzParse feeds the loader arbitrary bytes: it must never panic, must
// reject with every problem joined, and every config it accepts must dump to a config that
// parses back to the same dump (the dump is a fixed point).
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 30s -parallel 1 ./internal/config/
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, file := range seedFiles(f) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range integrationTestConfigs(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 || unsafePath(data) {
			return // see test/hostile: reading device files as secrets is tested there, bounded
		}
		cfg, err := Parse(data)
		if err != nil {
			j, ok := err.(interface{ Unwrap() []error })
			if !ok || len(j.Unwrap()) == 0 {
				t.Fatalf("rejected with %T %v, want errors.Join of every problem", err, err)
			}
			errs := j.Unwrap()
			for _, e := range errs {
				if e == nil || e.Error() == "" {
					t.Fatalf("empty error in %q", errs)
				}
			}
			return
		}
		if len(cfg.Targets) == 0 {
			return // an empty list is accepted; nothing to dump
		}
		for _, tg := range cfg.Targets {
			if tg.Probe == nil || len(tg.Resolved) == 0 || tg.Timeout <= 0 || tg.MaxInFlight < 1 {
				t.Fatalf("accepted target %q is incomplete: probe %v, ops %v, timeout %s, max_in_flight %d",
					tg.Name, tg.Probe, tg.Resolved, tg.Timeout, tg.MaxInFlight)
			}
		}
		dump, err := Dump(cfg)
		if err != nil {
			t.Fatalf("accepted config does not dump: %v", err)
		}
		again, err := Parse(dump)
		if err != nil {
			t.Fatalf("dump does not parse back: %v\ninput:\n%s\ndump:\n%s", err, data, dump)
		}
		dump2, err := Dump(again)
		if err != nil {
			t.Fatalf("re-parsed config does not dump: %v", err)
		}
		if !bytes.Equal(dump, dump2) {
			t.Fatalf("dump is not a fixed point:\nfirst:\n%s\nsecond:\n%s", dump, dump2)
		}
	})
}

// unsafePath reports inputs naming device or proc files: as a password_file
// or ca_file they would be read without end (test/hostile covers that).
func unsafePath(data []byte) bool {
	for _, p := range []string{"/dev", "/proc", "/sys", "/run", "..", "~"} {
		if bytes.Contains(data, []byte(p)) {
			return true
		}
	}
	return false
}

// seedFiles are the real configs of the repository.
func seedFiles(f *testing.F) []string {
	files := []string{filepath.Join("..", "..", "deploy", "local", "dbcanary.yaml")}
	more, err := filepath.Glob(filepath.Join("testdata", "*.yml"))
	if err != nil {
		f.Fatal(err)
	}
	return append(files, more...)
}

// integrationTestConfigs extracts the YAML templates embedded in the probes'
// integration tests (raw string literals naming a backend or a backend
// section's keys), with fmt verbs replaced by plausible values.
func integrationTestConfigs(f *testing.F) []string {
	files, err := filepath.Glob(filepath.Join("..", "..", "probes", "*", "*_integration_test.go"))
	if err != nil {
		f.Fatal(err)
	}
	verbs := strings.NewReplacer("%q", `"127.0.0.1"`, "%d", "9042", "%s", "x", "%%", "%")
	var out []string
	for _, file := range files {
		af, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			f.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || !strings.HasPrefix(lit.Value, "`") {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, k := range []string{"backend:", "hosts:", "addresses:", "endpoint:", "url:"} {
				if strings.Contains(s, k) {
					out = append(out, verbs.Replace(s))
					break
				}
			}
			return true
		})
	}
	if len(out) == 0 {
		f.Fatal("no config found in the probes' integration tests")
	}
	return out
}

// TestFuzzSeedsAreValid keeps the hand-written seeds valid, so the fuzzer
// starts from configs that reach every backend's Validate and the dump.
func TestFuzzSeedsAreValid(t *testing.T) {
	for i, s := range fuzzSeeds {
		if _, err := Parse([]byte(s)); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}
