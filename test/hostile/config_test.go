package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/all"
)

// target renders a one-target config whose backend section is section.
func target(backend, section string) string {
	return "global: {instance_id: hostile}\ntargets:\n  - name: t\n    backend: " + backend + "\n    " + backend + ":\n" + indent(section, 6) + "\n"
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

const (
	pw        = "testdata/password"
	mqBase    = "url: amqp://127.0.0.1:5672/\npassword_file: " + pw + "\n"
	cassBase  = "hosts: [127.0.0.1]\n"
	osBase    = "addresses: [http://127.0.0.1:9200]\n"
	s3Base    = "endpoint: http://127.0.0.1:9000\n"
	noopBase  = "delay: 1ms\n"
	credValue = "hunter2-in-url"
)

type badConfig struct {
	name, yaml string
	want       []string
}

// badConfigs covers every backend's section: each case is one mistake an
// operator can make, with the exact message they get.
var badConfigs = []badConfig{
	// rabbitmq
	{"rabbitmq/url missing", target("rabbitmq", "password_file: "+pw), []string{"targets[0].rabbitmq.url: missing: amqp://host:5672/vhost or amqps://host:5671/vhost"}},
	{"rabbitmq/url password", target("rabbitmq", "url: amqp://u:"+credValue+"@127.0.0.1/\npassword_file: "+pw), []string{"targets[0].rabbitmq.url: must not contain a password: use password_file or password_env"}},
	{"rabbitmq/url unparsable", target("rabbitmq", "url: \"amqp://u:"+credValue+"@[::1\"\npassword_file: "+pw), []string{"targets[0].rabbitmq.url: not a valid URL: parse: missing ']' in host"}},
	{"rabbitmq/both secret sources", target("rabbitmq", mqBase+"password_env: HOME"), []string{"targets[0].rabbitmq.password_file: set only one of password_file and password_env"}},
	{"rabbitmq/secret file is a directory", target("rabbitmq", "url: amqp://127.0.0.1/\npassword_file: testdata"), []string{"targets[0].rabbitmq.password_file: cannot read secret file: read testdata: is a directory"}},
	{"rabbitmq/tls files", target("rabbitmq", mqBase+"tls: {ca_file: testdata/notpem.txt, cert_file: testdata/password}"), []string{
		"targets[0].rabbitmq.tls.ca_file: no PEM certificate found in testdata/notpem.txt",
		"targets[0].rabbitmq.tls.cert_file: cert_file and key_file must be set together",
	}},
	{"rabbitmq/tls missing ca", target("rabbitmq", mqBase+"tls: {ca_file: /nonexistent/ca.pem}"), []string{"targets[0].rabbitmq.tls.ca_file: open /nonexistent/ca.pem: no such file or directory"}},
	{"rabbitmq/durations and sizes", target("rabbitmq", mqBase+"connect_timeout: 0s\nheartbeat: -1s\nqueue_expires: 500ms\nmax_length: 0\nmessage_size: 64\nloss_timeout: -1s"), []string{
		"targets[0].rabbitmq.connect_timeout: must be positive",
		"targets[0].rabbitmq.heartbeat: must not be negative",
		"targets[0].rabbitmq.queue_expires: must be at least 1s, got 500ms (it bounds how long an abandoned canary queue lingers)",
		"targets[0].rabbitmq.max_length: must be at least 1, got 0",
		"targets[0].rabbitmq.message_size: must be between 128 and 134217728 bytes, got 64",
		"targets[0].rabbitmq.loss_timeout: must be positive",
	}},
	{"rabbitmq/huge message", target("rabbitmq", mqBase+"message_size: 1000000000"), []string{"targets[0].rabbitmq.message_size: must be between 128 and 134217728 bytes, got 1000000000"}},
	{"rabbitmq/long queue prefix", target("rabbitmq", mqBase+"queue_prefix: "+strings.Repeat("q", 201)), []string{"targets[0].rabbitmq.queue_prefix: too long (queue names are at most 255 bytes)"}},
	{"rabbitmq/tls wrong type", target("rabbitmq", mqBase+"tls: yes"), []string{"targets[0].rabbitmq.tls: line 8: expected a mapping, got \"yes\""}},
	{"rabbitmq/section is a list", target("rabbitmq", "- url: amqp://127.0.0.1/"), []string{"targets[0].rabbitmq: line 6: expected a mapping, got a list"}},
	// cassandra
	{"cassandra/hosts missing", target("cassandra", "port: 9042"), []string{"targets[0].cassandra.hosts: missing: list at least one contact point (host or host:port)"}},
	{"cassandra/hosts scalar", target("cassandra", "hosts: 127.0.0.1"), []string{"targets[0].cassandra.hosts: line 6: expected a list, got \"127.0.0.1\""}},
	{"cassandra/bad hosts", target("cassandra", "hosts: [\"a/b\", \"h:0\", \"h:x:y\", \"\", \"u@h\"]"), []string{
		"targets[0].cassandra.hosts[0]: \"a/b\" is not a host name or address",
		"targets[0].cassandra.hosts[1]: \"h:0\": port must be between 1 and 65535",
		"targets[0].cassandra.hosts[2]: \"h:x:y\" is not host or host:port: address h:x:y: too many colons in address",
		"targets[0].cassandra.hosts[3]: \"\" is not a host name or address",
		"targets[0].cassandra.hosts[4]: a host must not contain credentials (user@ or user:password@): use username and password_file",
	}},
	{"cassandra/port and dc", target("cassandra", cassBase+"port: 70000\nlocal_dc: \"dc 1\""), []string{
		"targets[0].cassandra.port: must be between 1 and 65535, got 70000",
		"targets[0].cassandra.local_dc: \"dc 1\" is not a data centre name",
	}},
	{"cassandra/password without username", target("cassandra", cassBase+"password_file: "+pw), []string{"targets[0].cassandra.username: missing: password_file or password_env is set but no username"}},
	{"cassandra/username without password", target("cassandra", cassBase+"username: cassandra"), []string{"targets[0].cassandra.password_file: a secret is required: set password_file or password_env"}},
	{"cassandra/system keyspace", target("cassandra", cassBase+"keyspace: system_auth"), []string{"targets[0].cassandra.keyspace: \"system_auth\" is a Cassandra system keyspace: the canary only writes its own keyspace"}},
	{"cassandra/bad keyspace", target("cassandra", cassBase+"keyspace: Canary-1"), []string{"targets[0].cassandra.keyspace: \"Canary-1\" must be 1-48 lowercase letters, digits or '_', starting with a letter"}},
	{"cassandra/replication class", target("cassandra", cassBase+"replication: {class: EverywhereStrategy}"), []string{"targets[0].cassandra.replication.class: must be SimpleStrategy or NetworkTopologyStrategy, got \"EverywhereStrategy\""}},
	{"cassandra/nts without dcs", target("cassandra", cassBase+"replication: {class: NetworkTopologyStrategy}"), []string{"targets[0].cassandra.replication.datacenters: missing: NetworkTopologyStrategy needs a replication factor per data centre, e.g. {dc1: 3}"}},
	{"cassandra/nts bad dcs", target("cassandra", cassBase+"replication: {class: NetworkTopologyStrategy, datacenters: {\"d c\": 0}}"), []string{
		"targets[0].cassandra.replication.datacenters: \"d c\" is not a data centre name",
		"targets[0].cassandra.replication.datacenters.d c: must be between 1 and 100, got 0",
	}},
	{"cassandra/simple with dcs", target("cassandra", cassBase+"replication: {class: SimpleStrategy, replication_factor: 0, datacenters: {dc1: 1}}"), []string{
		"targets[0].cassandra.replication.replication_factor: must be between 1 and 100, got 0",
		"targets[0].cassandra.replication.datacenters: only for NetworkTopologyStrategy",
	}},
	{"cassandra/ttl", target("cassandra", cassBase+"ttl: 1500ms"), []string{
		"targets[0].cassandra.ttl: must be whole seconds between 10s and 20 years, got 1.5s (it bounds the canary's footprint)",
	}},
	{"cassandra/ttl fraction", target("cassandra", cassBase+"ttl: 10500ms"), []string{"targets[0].cassandra.ttl: must be whole seconds between 10s and 20 years, got 10.5s (it bounds the canary's footprint)"}},
	{"cassandra/read_min_age", target("cassandra", cassBase+"ttl: 20s\nread_min_age: 10s"), []string{"targets[0].cassandra.read_min_age: must be between 0 and half the ttl, got 10s"}},
	{"cassandra/durations", target("cassandra", cassBase+"connect_timeout: 0s\nrequest_timeout: -1s\nreconnect_interval: 0s"), []string{
		"targets[0].cassandra.connect_timeout: must be positive, got 0s",
		"targets[0].cassandra.request_timeout: must be positive, got -1s",
		"targets[0].cassandra.reconnect_interval: must be positive, got 0s",
	}},
	{"cassandra/profile", target("cassandra", cassBase+"profile: ycsb_b"), []string{"targets[0].cassandra.profile: must be mixed_workload or ycsb_a, got \"ycsb_b\""}},
	{"cassandra/consistency", target("cassandra", cassBase+"consistency: {update: QUORUM, read: SERIAL, insert: MOST}"), []string{
		"targets[0].cassandra.consistency.insert: \"MOST\" is not a consistency level (ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM, LOCAL_ONE)",
		"targets[0].cassandra.consistency.read: SERIAL is only for lightweight transactions",
		"targets[0].cassandra.consistency.update: unknown op for profile mixed_workload (ops: insert, read, read_miss, ledger_write, ledger_check)",
	}},
	{"cassandra/mixed sizes", target("cassandra", cassBase+"mixed_workload: {a_size: {min: 10, max: 1}, b_size: {min: 1, max: 20000000}, recent_keys: 0}"), []string{
		"targets[0].cassandra.mixed_workload.a_size: need 1 <= min <= max <= 16777216 bytes, got min 10 max 1",
		"targets[0].cassandra.mixed_workload.b_size: need 1 <= min <= max <= 16777216 bytes, got min 1 max 20000000",
		"targets[0].cassandra.mixed_workload.recent_keys: must be between 1 and 1000000, got 0",
	}},
	{"cassandra/ycsb limits", target("cassandra", cassBase+"profile: ycsb_a\nycsb_a: {record_count: 0, field_length: 2000000}"), []string{
		"targets[0].cassandra.ycsb_a.record_count: must be between 1 and 10000000, got 0",
		"targets[0].cassandra.ycsb_a.field_length: must be between 1 and 1048576 bytes, got 2000000",
	}},
	{"cassandra/unknown key", target("cassandra", cassBase+"hots: [x]"), []string{"targets[0].cassandra.hots: line 7: unknown field \"hots\" (did you mean \"hosts\"?)"}},
	// opensearch
	{"opensearch/addresses missing", target("opensearch", "replicas: 0"), []string{"targets[0].opensearch.addresses: missing: at least one node URL such as https://opensearch:9200"}},
	{"opensearch/address credentials", target("opensearch", "addresses: [\"http://admin:"+credValue+"@127.0.0.1:9200\"]"), []string{"targets[0].opensearch.addresses[0]: must not contain credentials: use username and password_file or password_env"}},
	{"opensearch/address unparsable", target("opensearch", "addresses: [\"http://admin:"+credValue+"@[::1\"]"), []string{"targets[0].opensearch.addresses[0]: not a valid URL: missing ']' in host"}},
	{"opensearch/address scheme and host", target("opensearch", "addresses: [\"ftp://127.0.0.1\", \"http://\"]"), []string{
		"targets[0].opensearch.addresses[0]: scheme must be http or https, got \"ftp\"",
		"targets[0].opensearch.addresses[1]: no host: want http(s)://host:port",
	}},
	{"opensearch/tls with http", target("opensearch", osBase+"tls: {enabled: true}"), []string{"targets[0].opensearch.tls: TLS settings need https:// addresses"}},
	{"opensearch/password without username", target("opensearch", osBase+"password_env: HOME"), []string{"targets[0].opensearch.username: missing: password_file/password_env is set but username is not"}},
	{"opensearch/limits", target("opensearch", osBase+"max_retries: 11\nindex_prefix: _canary\nreplicas: -1\nrefresh_interval: 1ms\nretention: 1h\nbulk_size: 0\nbody_words: 5"), []string{
		"targets[0].opensearch.max_retries: must be between 0 and 10, got 11",
		"targets[0].opensearch.index_prefix: \"_canary\" is not a valid index name prefix: lowercase letters, digits, '.', '_', '-', not starting with '-', '_' or '.'",
		"targets[0].opensearch.replicas: must be between 0 and 10, got -1",
		"targets[0].opensearch.refresh_interval: must be between 10ms and 5m, got 1ms (the visibility op needs periodic refreshes)",
		"targets[0].opensearch.retention: must be at least 24h (indices are daily), got 1h0m0s",
		"targets[0].opensearch.bulk_size: must be between 1 and 1000, got 0",
		"targets[0].opensearch.body_words: must be between 10 and 100000, got 5",
	}},
	{"opensearch/timeouts", target("opensearch", osBase+"connect_timeout: 0s\nrequest_timeout: 0s\npoll_interval: 100us\nvisibility_timeout: 50us"), []string{
		"targets[0].opensearch.connect_timeout: must be positive",
		"targets[0].opensearch.request_timeout: must be positive",
		"targets[0].opensearch.poll_interval: must be at least 1ms, got 100µs",
		"targets[0].opensearch.visibility_timeout: must be longer than poll_interval (100µs), got 50µs",
	}},
	{"opensearch/visibility below poll", target("opensearch", osBase+"poll_interval: 1s\nvisibility_timeout: 1s"), []string{"targets[0].opensearch.visibility_timeout: must be longer than poll_interval (1s), got 1s"}},
	// s3
	{"s3/endpoint missing", target("s3", "bucket: dbcanary"), []string{"targets[0].s3.endpoint: missing: https://host[:port] of the S3 endpoint"}},
	{"s3/endpoint credentials", target("s3", "endpoint: \"http://AKIA:"+credValue+"@127.0.0.1:9000\""), []string{"targets[0].s3.endpoint: must not contain credentials: use access_key_id_file and secret_access_key_file"}},
	{"s3/endpoint unparsable", target("s3", "endpoint: \"http://AKIA:"+credValue+"@[::1\""), []string{"targets[0].s3.endpoint: not a valid URL: parse: missing ']' in host"}},
	{"s3/endpoint path", target("s3", "endpoint: http://127.0.0.1:9000/bucket?x=1"), []string{"targets[0].s3.endpoint: must be scheme://host[:port] without a path or query (the bucket is set by bucket)"}},
	{"s3/endpoint scheme", target("s3", "endpoint: ftp://127.0.0.1:9000"), []string{"targets[0].s3.endpoint: scheme must be http or https, got \"ftp\""}},
	{"s3/region addressing bucket prefix", target("s3", s3Base+"region: \"\"\naddressing: dns\nbucket: Canary_Bucket\nprefix: /canary"), []string{
		"targets[0].s3.region: missing (us-east-1 for MinIO and most S3-compatible stores)",
		"targets[0].s3.addressing: must be auto, path or virtual, got \"dns\"",
		"targets[0].s3.bucket: \"Canary_Bucket\": Bucket name contains invalid characters",
		"targets[0].s3.prefix: \"/canary\" must end with '/', not start with '/', and be at most 512 bytes",
	}},
	{"s3/key without secret", target("s3", s3Base+"access_key_id_file: "+pw), []string{"targets[0].s3.secret_access_key_file: set both an access key id (access_key_id_file or _env) and a secret key (secret_access_key_file or _env), or neither to use the default credential chain"}},
	{"s3/token without key", target("s3", s3Base+"session_token_env: HOME"), []string{"targets[0].s3.session_token_file: a session token needs access_key_id_* and secret_access_key_* too"}},
	{"s3/unset secret env", target("s3", s3Base+"access_key_id_env: DBCANARY_HOSTILE_UNSET\nsecret_access_key_file: /nonexistent/secret"), []string{
		"targets[0].s3.access_key_id_env: environment variable DBCANARY_HOSTILE_UNSET is not set",
		"targets[0].s3.secret_access_key_file: cannot read secret file: open /nonexistent/secret: no such file or directory",
	}},
	{"s3/sizes", target("s3", s3Base+"sizes: [4KiB, 4096, 2GiB, 0]"), []string{
		"targets[0].s3.sizes[1]: 4KiB is listed twice",
		"targets[0].s3.sizes[2]: must be between 1B and 1GiB, got 2GiB",
		"targets[0].s3.sizes[3]: must be between 1B and 1GiB, got 0B",
	}},
	{"s3/no sizes", target("s3", s3Base+"sizes: []"), []string{"targets[0].s3.sizes: list 1 to 8 object sizes (each is its own set of op series), got 0"}},
	{"s3/too many sizes", target("s3", s3Base+"sizes: [1, 2, 3, 4, 5, 6, 7, 8, 9]"), []string{"targets[0].s3.sizes: list 1 to 8 object sizes (each is its own set of op series), got 9"}},
	{"s3/size syntax", target("s3", s3Base+"sizes: [4 KB]"), []string{"targets[0].s3.sizes[0]: line 7: \"4 KB\" is not a size: use a whole number with an optional unit B, KiB, MiB or GiB (e.g. 128KiB)"}},
	{"s3/size is a mapping", target("s3", s3Base+"sizes: [{a: 1}]"), []string{"targets[0].s3.sizes[0]: line 7: a size must be a scalar such as 4KiB"}},
	{"s3/size overflow", target("s3", s3Base+"sizes: [99999999999999999999GiB]"), []string{"targets[0].s3.sizes[0]: line 7: \"99999999999999999999GiB\" is not a size: use a whole number with an optional unit B, KiB, MiB or GiB (e.g. 128KiB)"}},
	{"s3/multipart and objects", target("s3", s3Base+"multipart_threshold: 1MiB\nmax_objects_per_size: 101"), []string{
		"targets[0].s3.multipart_threshold: must be between 5MiB (the S3 minimum part size) and 1GiB, got 1MiB",
		"targets[0].s3.max_objects_per_size: must be between 1 and 100, got 101",
	}},
	{"s3/tls cert without key", target("s3", s3Base+"tls: {cert_file: testdata/password}"), []string{"targets[0].s3.tls.cert_file: cert_file and key_file must be set together"}},
	// noop
	{"noop/negative values", target("noop", "delay: -1s\npayload_bytes: -1"), []string{
		"targets[0].noop.delay: must not be negative",
		"targets[0].noop.payload_bytes: must not be negative",
	}},
	{"noop/cause", target("noop", noopBase+"failure_cause: boom"), []string{"targets[0].noop.failure_cause: unknown cause \"boom\" (one of [timeout refused dns tls auth setup not_found mismatch lost stale server backlog other])"}},
	{"noop/wrong types", target("noop", "delay: soon\nfailure_ratio: high\npayload_bytes: 1.5"), []string{
		"targets[0].noop.delay: line 6: cannot unmarshal !!str `soon` into time.Duration",
		"targets[0].noop.failure_ratio: line 7: cannot unmarshal !!str `high` into float64",
	}},
	// generic hostile documents
	{"yaml/scalar document", "just a string\n", []string{"line 1: the config must be a mapping with global and targets"}},
	{"yaml/tab indentation", "targets:\n\t- name: x\n", []string{"config is not valid YAML: line 2: found character that cannot start any token"}},
	{"yaml/NUL byte", "targets:\n  - name: \"a\x00b\"\n    backend: noop\n", []string{"config is not valid YAML: control characters are not allowed"}},
	{"yaml/invalid UTF-8", "targets:\n  - name: \xff\xfe\n    backend: noop\n", []string{"config is not valid YAML: invalid leading UTF-8 octet"}},
	{"yaml/rate NaN and Inf", "targets:\n  - name: x\n    backend: noop\n    ops: {noop: {rate: .nan}}\n  - name: y\n    backend: noop\n    ops: {noop: {rate: .inf}}\n", []string{
		"targets[0].ops.noop.rate: must be between 0 and 10000 ops/s, got NaN",
		"targets[1].ops.noop.rate: must be between 0 and 10000 ops/s, got +Inf",
	}},
	{"yaml/bad glob", "targets:\n  - name: x\n    backend: noop\n    ops: {\"[\": {rate: 1}}\n", []string{
		"targets[0].ops.[: bad pattern: syntax error in pattern",
		"targets[0].ops.[: unknown op \"[\" for backend noop (known: noop)",
	}},
	{"yaml/huge timeout", "global: {timeout: 9999999999h}\ntargets: []\n", []string{"global.timeout: line 1: cannot unmarshal !!str `9999999...` into time.Duration"}},
	{"yaml/anchor to a mapping as a target", "x: &a {name: q}\ntargets: [*a]\n", []string{
		"x: line 1: unknown field \"x\" (known: global, targets)",
		// The registry's names: linking a backend does not change this test.
		"targets[0].backend: missing: one of " + strings.Join(probes.Names(), ", "),
	}},
}

// TestBadBackendConfigs asserts the exact messages for mistakes in every
// backend's section, on top of internal/config's own table.
func TestBadBackendConfigs(t *testing.T) {
	os.Unsetenv("DBCANARY_HOSTILE_UNSET")
	for _, c := range badConfigs {
		t.Run(c.name, func(t *testing.T) {
			got := parseErrors(t, c.yaml)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("errors:\n got: %q\nwant: %q", got, c.want)
			}
		})
	}
}

func parseErrors(t *testing.T, yaml string) []string {
	t.Helper()
	_, err := config.Parse([]byte(yaml))
	if err == nil {
		t.Fatal("config accepted")
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error is %T, not every problem joined: %v", err, err)
	}
	errs := j.Unwrap()
	got := make([]string, len(errs))
	for i, e := range errs {
		got[i] = e.Error()
	}
	return got
}

// TestConfigErrorsHoldNoSecret: a credential put where it does not belong (a
// URL's user info) is rejected without being echoed, and no error ever shows
// a secret file's content.
func TestConfigErrorsHoldNoSecret(t *testing.T) {
	secret, err := os.ReadFile(pw)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range badConfigs {
		_, err := config.Parse([]byte(c.yaml))
		if err == nil {
			continue
		}
		for _, marker := range []string{credValue, strings.TrimSpace(string(secret))} {
			if strings.Contains(err.Error(), marker) {
				t.Errorf("%s: error shows a secret:\n%v", c.name, err)
			}
		}
	}
}

// TestYAMLBombs: alias expansion (billion laughs), deep nesting and a large
// file are rejected or accepted quickly and without unbounded memory.
func TestYAMLBombs(t *testing.T) {
	var laughs strings.Builder
	laughs.WriteString("a0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&laughs, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	bomb := laughs.String()
	var mapBomb strings.Builder
	mapBomb.WriteString("m0: &m0 {k0: 1, k1: 1, k2: 1, k3: 1, k4: 1, k5: 1, k6: 1, k7: 1, k8: 1}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&mapBomb, "m%d: &m%d {k0: *m%d, k1: *m%d, k2: *m%d, k3: *m%d, k4: *m%d, k5: *m%d, k6: *m%d, k7: *m%d, k8: *m%d}\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	var many strings.Builder
	many.WriteString("targets:\n")
	for i := range 5000 {
		fmt.Fprintf(&many, "  - {name: t%d, backend: noop, labels: {a: b}, ops: {noop: {rate: 0.1}}}\n", i)
	}
	cases := []struct{ name, yaml string }{
		{"billion laughs as hosts", bomb + "targets:\n  - name: x\n    backend: cassandra\n    cassandra: {hosts: *a9}\n"},
		{"billion laughs as targets", bomb + "targets: *a9\n"},
		{"billion laughs as labels", bomb + "targets:\n  - {name: x, backend: noop, labels: {a: *a9}}\n"},
		{"billion laughs as a section", mapBomb.String() + "targets:\n  - {name: x, backend: noop, noop: *m9}\n"},
		{"billion laughs as ops", mapBomb.String() + "targets:\n  - {name: x, backend: noop, ops: *m9}\n"},
		{"billion laughs as global", mapBomb.String() + "global: *m9\ntargets: []\n"},
		{"billion laughs as datacenters", mapBomb.String() + "targets:\n  - {name: x, backend: cassandra, cassandra: {hosts: [h], replication: {class: NetworkTopologyStrategy, datacenters: *m9}}}\n"},
		{"deep list", "targets: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n"},
		{"deep mapping", "targets:\n" + strings.Repeat("{a: ", 100000) + "1" + strings.Repeat("}", 100000) + "\n"},
		{"5000 targets", many.String()},
		{"1 MiB key", "targets: []\n" + strings.Repeat("k", 1<<20) + ": 1\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			done := make(chan error, 1)
			go func() { _, err := config.Parse([]byte(c.yaml)); done <- err }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Parse did not return within 30 s")
			}
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %s, %d MiB allocated in total", c.name, time.Since(start).Round(time.Millisecond), allocated>>20)
			if allocated > 1<<30 {
				t.Errorf("Parse allocated %d MiB for a %d KiB input", allocated>>20, len(c.yaml)>>10)
			}
		})
	}
}

// TestSecretFileIsBounded: a secret or CA file that never ends (a FIFO, a
// device such as /dev/zero, a mis-mounted volume) must not be read into
// memory without limit: check-config and every connect read it. The FIFO
// here streams at most 64 MiB, so the test itself is bounded.
func TestSecretFileIsBounded(t *testing.T) {
	for _, field := range []string{"password_file", "tls.ca_file"} {
		t.Run(field, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "endless")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			const limit = 64 << 20
			written := make(chan int64, 1)
			go func() {
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					written <- -1
					return
				}
				defer f.Close()
				chunk := make([]byte, 64<<10)
				for i := range chunk {
					chunk[i] = 'z'
				}
				var n int64
				for n < limit {
					m, err := f.Write(chunk)
					n += int64(m)
					if err != nil {
						break // the reader stopped reading: good
					}
				}
				written <- n
			}()
			section := mqBase
			if field == "password_file" {
				section = "url: amqp://127.0.0.1:5672/\npassword_file: " + fifo
			} else {
				section += "tls: {ca_file: " + fifo + "}"
			}
			_, err := config.Parse([]byte(target("rabbitmq", section)))
			var n int64
			select {
			case n = <-written:
			case <-time.After(30 * time.Second):
				t.Fatal("writer still blocked after 30 s")
			}
			t.Logf("config error: %v; %d MiB consumed from the file", err, n>>20)
			if n >= limit {
				t.Errorf("the loader read all %d MiB of an endless %s into memory (and would read /dev/zero until out of memory): "+
					"bound the read (probes/secret.go readFile, probes/tls.go loadCA)", n>>20, field)
			}
			if err == nil {
				t.Errorf("an endless %s was accepted", field)
			}
		})
	}
}
