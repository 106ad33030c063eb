//go:build integration

package leak

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	_ "github.com/dbcanary/dbcanary/probes/all"
	"github.com/dbcanary/dbcanary/test/stack"
)

var envs = map[string]stack.Env{}

func TestMain(m *testing.M) {
	for _, b := range []string{"rabbitmq", "cassandra", "opensearch", "minio"} {
		envs[b] = stack.Must(b)
	}
	stack.Exit(m.Run())
}

// discard is the Reporter of async ops (RabbitMQ's consume).
type discard struct{}

func (discard) Report(string, time.Time, time.Time, time.Time, *probes.Outcome, error) {}

// realProbes are one target per backend against the local stack, with the
// ops each runs a few times.
func realProbes(t *testing.T) []struct {
	name, yaml string
	ops        []string
} {
	mq, cass, os_, s3 := envs["rabbitmq"], envs["cassandra"], envs["opensearch"], envs["minio"]
	return []struct {
		name, yaml string
		ops        []string
	}{
		{"rabbitmq", fmt.Sprintf(`rabbitmq: {url: %q, username: %s, password_file: %s, loss_timeout: 5s}`,
			mq.Get(t, "DBCANARY_TEST_RABBITMQ_URL"), mq.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), mq.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE")),
			[]string{"publish", "publish", "publish"}},
		{"cassandra", fmt.Sprintf(`cassandra: {hosts: [%q], port: %s, username: %s, password_file: %s, local_dc: %s, keyspace: dbcanary_leak, replication: {class: SimpleStrategy, replication_factor: 1}, read_min_age: 0s}`,
			cass.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"), cass.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"), cass.Get(t, "DBCANARY_TEST_CASSANDRA_USER"),
			cass.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"), cass.Get(t, "DBCANARY_TEST_CASSANDRA_DC")),
			[]string{"insert", "insert", "read"}},
		{"opensearch", fmt.Sprintf(`opensearch: {addresses: [%q], replicas: 0, refresh_interval: 200ms, bulk_size: 2}`,
			os_.Get(t, "DBCANARY_TEST_OPENSEARCH_URL")),
			[]string{"index", "get", "search_default", "bulk"}},
		{"s3", fmt.Sprintf(`s3: {endpoint: "http://%s", addressing: path, bucket: dbcanary-leak, access_key_id_file: %s, secret_access_key_file: %s, sizes: [4KiB]}`,
			s3.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), s3.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), s3.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE")),
			[]string{"put_4KiB", "get_4KiB", "head_4KiB", "list"}},
	}
}

// TestRealProbeCloseLeavesNoGoroutine builds each backend's probe, prepares
// it against the real server, runs a few ops, closes it, and checks that
// no goroutine it started is left.
func TestRealProbeCloseLeavesNoGoroutine(t *testing.T) {
	for _, c := range realProbes(t) {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(fmt.Sprintf("global: {instance_id: leak-it}\ntargets:\n  - name: leak\n    backend: %s\n    %s\n", c.name, c.yaml)))
			if err != nil {
				t.Fatal(err)
			}
			tg := cfg.Targets[0]
			b, ok := probes.Lookup(tg.Backend)
			if !ok {
				t.Fatalf("backend %s is not registered", tg.Backend)
			}
			ignore := goleak.IgnoreCurrent()
			p, err := b.New(probes.Target{Name: tg.Name, InstanceID: cfg.Global.InstanceID, Config: tg.Probe, Logger: enginetest.Logger(), Report: discard{}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if err := p.Prepare(ctx); err != nil {
				p.Close()
				t.Fatalf("prepare: %v", err)
			}
			for _, op := range c.ops {
				octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
				var out probes.Outcome
				out.Reset(time.Now())
				err := p.Run(octx, op, &out)
				ocancel()
				if err != nil {
					t.Errorf("%s: %v", op, err)
				}
			}
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}
