//go:build integration

package faults

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	_ "github.com/dbcanary/dbcanary/probes/cassandra"
	_ "github.com/dbcanary/dbcanary/probes/opensearch"
	_ "github.com/dbcanary/dbcanary/probes/rabbitmq"
	_ "github.com/dbcanary/dbcanary/probes/s3"
	"github.com/dbcanary/dbcanary/test/stack"
)

// The groups run one backend at a time, lightest first: each starts its
// server, runs every fault against it, and stops it (if it started it).

var rabbitmqSpec = &spec{
	name: "rabbitmq", stack: "rabbitmq",
	upstream: func(t *testing.T, env stack.Env) string {
		return "127.0.0.1:" + env.Get(t, "DBCANARY_TEST_RABBITMQ_PORT")
	},
	section: func(t *testing.T, env stack.Env, addr, _ string) string {
		return fmt.Sprintf(`url: amqp://%s/
username: %s
password_file: %s
queue_expires: 5m
loss_timeout: 20s
`, addr, env.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), env.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"))
	},
	ops:    func(rate float64) string { return fmt.Sprintf("publish: {rate: %g}\nconsume: {}", rate) },
	steady: "publish", roundTrips: 1, // basic.publish goes up, basic.ack comes down
	maxBackoff: 2 * time.Second, triesPerOp: 1,
	dialBound: func(w time.Duration) float64 {
		// 250 ms, 500 ms, 1 s, then one dial per 2 s (+3 for the phase edges).
		return 3 + w.Seconds()/2 + 3
	},
	dialModel: "reconnect backoff 250 ms doubling to 2 s",
}

var s3Spec = &spec{
	name: "s3", stack: "minio",
	upstream: func(t *testing.T, env stack.Env) string { return env.Get(t, "DBCANARY_TEST_S3_ENDPOINT") },
	section: func(t *testing.T, env stack.Env, addr, _ string) string {
		return fmt.Sprintf(`endpoint: http://%s
region: %s
addressing: path
bucket: dbcanary-faults
create_bucket: true
access_key_id_file: %s
secret_access_key_file: %s
lifecycle_expiry: false
`, addr, env.Get(t, "DBCANARY_TEST_S3_REGION"), env.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), env.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE"))
	},
	ops: func(rate float64) string {
		return fmt.Sprintf("get_4KiB: {rate: %g}\nput_4KiB: {rate: 1}", rate)
	},
	steady: "get_4KiB", roundTrips: 1, // one GET, the 4 KiB body in the same response
	triesPerOp: 1, otherRate: 1, // minio-go MaxRetries 1: a single attempt
}

var opensearchSpec = &spec{
	name: "opensearch", stack: "opensearch",
	upstream: func(t *testing.T, env stack.Env) string {
		return "127.0.0.1:" + env.Get(t, "DBCANARY_TEST_OPENSEARCH_PORT")
	},
	section: func(t *testing.T, env stack.Env, addr, target string) string {
		return fmt.Sprintf(`addresses: ["http://%s"]
index_prefix: dbcanary-faults-%s-
replicas: 0
refresh_interval: 1s
`, addr, target)
	},
	ops: func(rate float64) string {
		return fmt.Sprintf("get: {rate: %g}\nindex: {rate: 1}", rate)
	},
	steady: "get", roundTrips: 1, // one GET /<index>/_doc/<id> on a kept-alive connection
	triesPerOp: 3, otherRate: 1, // max_retries 2 (default): up to 3 attempts per op
}

var cassandraSpec = &spec{
	name: "cassandra", stack: "cassandra",
	upstream: func(t *testing.T, env stack.Env) string {
		return env.Get(t, "DBCANARY_TEST_CASSANDRA_HOST") + ":" + env.Get(t, "DBCANARY_TEST_CASSANDRA_PORT")
	},
	section: func(t *testing.T, env stack.Env, addr, _ string) string {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		// port is the relay's: the driver reaches the node it discovers
		// (rpc_address 127.0.0.1) on the configured port too, so every
		// connection, control connection included, goes through the proxy.
		return fmt.Sprintf(`hosts: [%q]
port: %s
username: %s
password_file: %s
local_dc: %s
keyspace: dbcanary_faults
replication: {class: SimpleStrategy, replication_factor: 1}
ttl: 10m
reconnect_interval: 1s
mixed_workload: {a_size: {min: 100, max: 100}, b_size: {min: 1000, max: 1000}}
`, host, port, env.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), env.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"), env.Get(t, "DBCANARY_TEST_CASSANDRA_DC"))
	},
	ops: func(rate float64) string {
		return fmt.Sprintf("read: {rate: %g}\ninsert: {rate: 2}", rate)
	},
	steady: "read", roundTrips: 1, // one prepared SELECT: request up, rows down
	maxBackoff: 30 * time.Second, triesPerOp: 1, otherRate: 2,
	dialBound: func(w time.Duration) float64 {
		// gocql redials the control connection and the node's pool every
		// reconnect_interval (1 s here), with policy retries: a few per second.
		return 5*w.Seconds() + 3
	},
	dialModel: "gocql reconnect loops every reconnect_interval = 1 s",
}

func runGroup(t *testing.T, sp *spec, extra ...func(t *testing.T, f *fixture)) {
	env := startGroup(t, sp.stack)
	f := newFixture(t, sp, env)
	t.Run("latency", func(t *testing.T) { testLatency(t, f) })
	t.Run("stall", func(t *testing.T) { testStall(t, f) })
	t.Run("blackhole", func(t *testing.T) { testBlackhole(t, f) })
	t.Run("reset_and_cut", func(t *testing.T) { testResetAndCut(t, f) })
	for _, x := range extra {
		x(t, f)
	}
	t.Run("outage", func(t *testing.T) { testOutage(t, f) })
}

func TestRabbitMQ(t *testing.T) { runGroup(t, rabbitmqSpec) }

func TestS3(t *testing.T) {
	runGroup(t, s3Spec, func(t *testing.T, f *fixture) {
		t.Run("bandwidth_and_slicer_8MiB", func(t *testing.T) { testS3Large(t, f) })
	})
}

func TestOpenSearch(t *testing.T) {
	runGroup(t, opensearchSpec, func(t *testing.T, f *fixture) {
		t.Run("bandwidth_and_slicer_bulk", func(t *testing.T) { testOpenSearchBulk(t, f) })
	})
	// The canary indices of these tests only: the node is shared.
	req, _ := http.NewRequest(http.MethodDelete, "http://127.0.0.1:"+opensearchSpec.upstreamPort(t)+"/dbcanary-faults-*", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

func TestCassandra(t *testing.T) { runGroup(t, cassandraSpec) }

func (sp *spec) upstreamPort(t *testing.T) string {
	env, err := stack.Start(sp.stack)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(sp.upstream(t, env))
	return port
}

// throughToxics runs phases with a bandwidth limit, then a slicer (data cut
// into small, delayed pieces), in both directions, waiting each time for
// enough verified ops; any failure (mismatch above all) is reported.
func throughToxics(t *testing.T, f *fixture, p probe, ops []string, need uint64, phases []toxicPhase) {
	okOf := func(op string) uint64 {
		return p.h.HistogramCount(t, "dbcanary_op_latency_seconds", p.l("op", op, "result", "ok"))
	}
	for _, ph := range phases {
		c0 := p.causes()
		before := map[string]uint64{}
		for _, op := range ops {
			before[op] = okOf(op)
		}
		lat0 := snapshot(t, p.h, "dbcanary_op_latency_seconds", p.l("op", ops[0], "result", "ok"))
		for _, dir := range []string{"upstream", "downstream"} {
			f.toxic(t, ph.typ+"_"+dir, ph.typ, dir, ph.attrs)
		}
		took := waitUntil(t, 120*time.Second, fmt.Sprintf("%d ok %v ops through %s", need, ops, ph.name), func() bool {
			for _, op := range ops {
				if okOf(op) < before[op]+need {
					return false
				}
			}
			return true
		})
		for _, dir := range []string{"upstream", "downstream"} {
			f.removeToxic(t, ph.typ+"_"+dir)
		}
		lat := snapshot(t, p.h, "dbcanary_op_latency_seconds", p.l("op", ops[0], "result", "ok")).sub(lat0)
		causes := diffCauses(p.causes(), c0)
		t.Logf("%s (%v both ways): %d+ verified %v each in %s; %s mean latency %s; failures %v", ph.name, ph.attrs, need, ops, roundDur(took), ops[0], ms(lat.mean()), causes)
		record(f.spec.name, ph.name+" both ways", fmt.Sprintf("%s mean latency; failures", ops[0]), fmt.Sprintf("%s; %v", ms(lat.mean()), causes))
		if len(causes) != 0 {
			t.Errorf("%s: failures %v (mismatch means corrupted data got through unnoticed or was caught)", ph.name, causes)
		}
	}
}

type toxicPhase struct {
	name, typ string
	attrs     toxiproxy.Attributes
}

// testS3Large: 8 MiB objects (multipart above 5 MiB) written and read back
// byte for byte through a 4 MB/s bandwidth limit, then a slicer.
func testS3Large(t *testing.T, f *fixture) {
	target := "s3-large"
	h := f.engineOps(t, target, params{rate: 0.5, timeout: 30 * time.Second, maxInFlight: 2},
		"put_8MiB: {rate: 0.5}\nget_8MiB: {rate: 0.5}", "sizes: [8MiB]\n")
	p := probe{t: t, h: h, target: target, op: "get_8MiB"}
	waitUntil(t, 60*time.Second, "a verified 8 MiB get", func() bool { return p.ok() >= 1 })
	throughToxics(t, f, p, []string{"get_8MiB", "put_8MiB"}, 2, []toxicPhase{
		{"bandwidth 4 MB/s", "bandwidth", toxiproxy.Attributes{"rate": 4096}},
		{"slicer 1 KiB ±512 B, 20 µs", "slicer", toxiproxy.Attributes{"average_size": 1024, "size_variation": 512, "delay": 20}},
	})
}

// testOpenSearchBulk: bulks of 50 documents (~75 KB) through a 128 KB/s
// bandwidth limit, then a slicer; get reads the bulk-indexed documents back
// and compares every field.
func testOpenSearchBulk(t *testing.T, f *fixture) {
	target := "opensearch-bulk"
	h := f.engineOps(t, target, params{rate: 1, timeout: 10 * time.Second, maxInFlight: 4},
		"bulk: {rate: 1}\nget: {rate: 2}", "bulk_size: 50\nbody_words: 200\n")
	p := probe{t: t, h: h, target: target, op: "bulk"}
	waitUntil(t, 60*time.Second, "a bulk", func() bool { return p.ok() >= 1 })
	throughToxics(t, f, p, []string{"bulk", "get"}, 3, []toxicPhase{
		{"bandwidth 128 KB/s", "bandwidth", toxiproxy.Attributes{"rate": 128}},
		{"slicer 256 B ±128 B, 50 µs", "slicer", toxiproxy.Attributes{"average_size": 256, "size_variation": 128, "delay": 50}},
	})
}
