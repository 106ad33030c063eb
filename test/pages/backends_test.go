//go:build integration

package pages

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The faults that act on a server directly (not through dbcanary or a
// proxy): altering the canary's data behind its back, and preparing a setup
// error. They use admin credentials from the stack scripts and talk to the
// server itself, never through the targets' proxies.

// alterData changes data a target wrote; it returns what it did.
func alterData(ctx context.Context, t *testing.T, d *daemon, tg *target) (string, error) {
	switch tg.backend {
	case "cassandra":
		return alterCassandra(ctx, t, tg)
	case "opensearch":
		return alterOpenSearch(ctx, t, tg)
	case "rabbitmq":
		return alterRabbitMQ(ctx, t, tg)
	case "s3":
		return alterS3(ctx, t, d, tg)
	}
	return "", fmt.Errorf("no data fault for %s", tg.backend)
}

// prepareSetupError makes the server refuse what the target's setup mode
// needs (a user or role without a permission, a conflicting index template);
// it returns what it did and how to undo the server side.
func prepareSetupError(ctx context.Context, t *testing.T, d *daemon, tg *target) (string, func(context.Context) error, error) {
	none := func(context.Context) error { return nil }
	switch tg.backend {
	case "cassandra":
		s, err := cassandraAdmin(t)
		if err != nil {
			return "", none, err
		}
		defer s.Close()
		// cleanupServers dropped any earlier one (a password can only be
		// changed every 5 s, so the role is created fresh, not altered).
		stmt := fmt.Sprintf(`CREATE ROLE IF NOT EXISTS %s WITH PASSWORD = '%s' AND LOGIN = true`, casNoGrantRole, d.secret("cas-nogrant"))
		if err := s.Query(stmt).ExecContext(ctx); err != nil {
			return "", none, fmt.Errorf("cassandra: CREATE ROLE %s: %w", casNoGrantRole, err)
		}
		return fmt.Sprintf("reload as role %s (login, no grant on keyspace %s)", casNoGrantRole, cassandraKeyspace(tg)), none, nil
	case "opensearch":
		base := envs["opensearch"].Get(t, "DBCANARY_TEST_OPENSEARCH_URL")
		prefix := "dbcanary-" + tg.name + "-"
		tmpl := fmt.Sprintf(`{"index_patterns":[%q],"priority":500,"template":{"mappings":{"properties":{"seq":{"properties":{"conflict":{"type":"keyword"}}}}}}}`, prefix+"*")
		if st, body, err := request(ctx, http.MethodPut, base+"/_index_template/"+osConflictTemplate, tmpl); err != nil || st != http.StatusOK {
			return "", none, fmt.Errorf("opensearch: put template: %d %s %v", st, body, err)
		}
		undo := func(ctx context.Context) error {
			st, body, err := request(ctx, http.MethodDelete, base+"/_index_template/"+osConflictTemplate, "")
			if err != nil || (st != http.StatusOK && st != http.StatusNotFound) {
				return fmt.Errorf("opensearch: delete template: %d %s %v", st, body, err)
			}
			return nil
		}
		// The reload points the target at a new index prefix the template
		// matches (render, modeSetup): the canary creates an index it cannot
		// use, while the documents it already wrote stay where they are.
		return fmt.Sprintf("index template %s on %s* maps seq as an object (the canary's mapping has a long), and a reload with index_prefix %s", osConflictTemplate, prefix, osSetupPrefix(tg)), undo, nil
	case "rabbitmq":
		_, _ = rabbitmqctl("delete_user", mqNoConfUser)
		if out, err := rabbitmqctl("add_user", mqNoConfUser, d.secret("mq-noconf")); err != nil {
			return "", none, fmt.Errorf("rabbitmqctl add_user: %v: %s", err, out)
		}
		if out, err := rabbitmqctl("set_permissions", "-p", "/", mqNoConfUser, "^$", ".*", ".*"); err != nil {
			return "", none, fmt.Errorf("rabbitmqctl set_permissions: %v: %s", err, out)
		}
		return fmt.Sprintf("reload as user %s: write and read on .*, configure on nothing (^$) in vhost /", mqNoConfUser), none, nil
	case "s3":
		mc, err := minioAdmin(t)
		if err != nil {
			return "", none, err
		}
		if ok, err := mc.BucketExists(ctx, s3MissingBucket); err == nil && ok {
			if err := mc.RemoveBucket(ctx, s3MissingBucket); err != nil {
				return "", none, err
			}
		}
		return fmt.Sprintf("reload with bucket %s (missing) and create_bucket: false", s3MissingBucket), none, nil
	}
	return "", none, fmt.Errorf("no setup fault for %s", tg.backend)
}

const osConflictTemplate = "dbcanary-pages-conflict"

// cleanupServers removes what the setup faults left on the servers.
func cleanupServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := envs["opensearch"]["DBCANARY_TEST_OPENSEARCH_URL"]
	_, _, _ = request(ctx, http.MethodDelete, base+"/_index_template/"+osConflictTemplate, "")
	// The suite's canary indices (documents of earlier runs carry the same
	// instance id and would hide this run's from the data fault).
	var idx []string
	for _, role := range []string{roleRef, roleLat, roleCred, roleSetup, roleData} {
		idx = append(idx, "dbcanary-"+targetName("opensearch", role)+"-*")
	}
	_, _, _ = request(ctx, http.MethodDelete, base+"/"+strings.Join(idx, ","), "")
	_, _ = rabbitmqctl("delete_user", mqNoConfUser)
	cleanupS3(ctx, t)
	if s, err := cassandraAdmin(t); err == nil {
		_ = s.Query(`DROP ROLE IF EXISTS ` + casNoGrantRole).ExecContext(ctx)
		// Every run starts, as on a fresh stack, with no keyspace of its own:
		// the targets create them.
		for _, role := range []string{roleRef, roleLat, roleCred, roleSetup, roleData} {
			_ = s.Query(`DROP KEYSPACE IF EXISTS ` + cassandraKeyspace(&target{role: role})).ExecContext(ctx)
		}
		s.Close()
	}
}

func cassandraAdmin(t *testing.T) (*gocql.Session, error) {
	e := envs["cassandra"]
	pw, err := os.ReadFile(e.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"))
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(e.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"))
	cl := gocql.NewCluster(e.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"))
	cl.Port = port
	cl.Consistency = gocql.One
	cl.Timeout, cl.ConnectTimeout = 20*time.Second, 20*time.Second
	cl.Authenticator = gocql.PasswordAuthenticator{Username: e.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), Password: strings.TrimSpace(string(pw))}
	return cl.CreateSession()
}

// alterCassandra overwrites blob a of every canary row in the target's table.
// The ledger's rows (written with blob a only, b null) are left alone: they are
// the durability ledger's, which another alert reports.
func alterCassandra(ctx context.Context, t *testing.T, tg *target) (string, error) {
	s, err := cassandraAdmin(t)
	if err != nil {
		return "", err
	}
	defer s.Close()
	table := cassandraKeyspace(tg) + ".mixed_workload"
	iter := s.Query(`SELECT key, b FROM ` + table).IterContext(ctx)
	var keys []gocql.UUID
	var k gocql.UUID
	var b []byte
	for iter.Scan(&k, &b) {
		if b != nil {
			keys = append(keys, k)
		}
	}
	if err := iter.Close(); err != nil {
		return "", fmt.Errorf("cassandra: select keys: %w", err)
	}
	for _, k := range keys {
		if err := s.Query(`UPDATE `+table+` SET a = ? WHERE key = ?`, []byte("altered by the page-quality suite"), k).ExecContext(ctx); err != nil {
			return "", fmt.Errorf("cassandra: update: %w", err)
		}
	}
	if len(keys) == 0 {
		return "", fmt.Errorf("cassandra: no rows in %s to alter", table)
	}
	return fmt.Sprintf("UPDATE of blob a in all %d canary rows of %s (ledger rows left alone)", len(keys), table), nil
}

// osSetupPrefix is the index prefix a target in setup mode is reloaded with.
func osSetupPrefix(tg *target) string { return "dbcanary-" + tg.name + "-conf-" }

// alterOpenSearch overwrites the canary documents of this instance in the
// target's indices. The ledger's documents (ids "ledger-...") are left alone:
// they are the durability ledger's, which another alert reports.
func alterOpenSearch(ctx context.Context, t *testing.T, tg *target) (string, error) {
	base := envs["opensearch"].Get(t, "DBCANARY_TEST_OPENSEARCH_URL")
	pattern := "dbcanary-" + tg.name + "-*"
	// The get op reads one of the last 64 documents this process indexed:
	// the newest 1000 cover them.
	st, body, err := request(ctx, http.MethodPost, base+"/"+pattern+"/_search",
		fmt.Sprintf(`{"size":1000,"sort":[{"seq":"desc"}],"query":{"term":{"instance":%q}}}`, instanceID))
	if err != nil || st != http.StatusOK {
		return "", fmt.Errorf("opensearch: search: %d %v %.300s", st, err, body)
	}
	var r struct {
		Hits struct {
			Hits []struct {
				Index  string         `json:"_index"`
				ID     string         `json:"_id"`
				Source map[string]any `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return "", err
	}
	var bulk bytes.Buffer
	altered := 0
	for _, h := range r.Hits.Hits {
		if strings.HasPrefix(h.ID, "ledger-") {
			continue
		}
		altered++
		h.Source["title"] = "altered by the page-quality suite"
		meta, _ := json.Marshal(map[string]any{"index": map[string]any{"_index": h.Index, "_id": h.ID}})
		doc, _ := json.Marshal(h.Source)
		bulk.Write(meta)
		bulk.WriteByte('\n')
		bulk.Write(doc)
		bulk.WriteByte('\n')
	}
	if altered == 0 {
		return "", fmt.Errorf("opensearch: no documents of instance %s in %s", instanceID, pattern)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/_bulk?refresh=true", &bulk)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := httpc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var br struct {
		Errors bool `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&br); err != nil || resp.StatusCode != http.StatusOK || br.Errors {
		return "", fmt.Errorf("opensearch: bulk overwrite: %s errors=%v %v", resp.Status, br.Errors, err)
	}
	return fmt.Sprintf("title of the newest %d canary documents in %s overwritten (ledger documents left alone)", altered, pattern), nil
}

// alterRabbitMQ publishes foreign messages into the target's canary queue.
func alterRabbitMQ(ctx context.Context, t *testing.T, tg *target) (string, error) {
	e := envs["rabbitmq"]
	pw, err := os.ReadFile(e.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"))
	if err != nil {
		return "", err
	}
	conn, err := amqp.DialConfig(e.Get(t, "DBCANARY_TEST_RABBITMQ_URL"), amqp.Config{SASL: []amqp.Authentication{
		&amqp.PlainAuth{Username: e.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), Password: strings.TrimSpace(string(pw))}}})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return "", err
	}
	if err := ch.Confirm(false); err != nil {
		return "", err
	}
	queue := "dbcanary." + tg.name + "." + instanceID
	const n = 3
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "text/plain",
			Body: []byte(fmt.Sprintf("not a canary message %d (page-quality suite)", i))})
		if err != nil {
			return "", err
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			return "", fmt.Errorf("rabbitmq: publish into %s not confirmed: %v", queue, err)
		}
	}
	return fmt.Sprintf("%d foreign messages published into the canary queue %s", n, queue), nil
}

func minioAdmin(t *testing.T) (*minio.Client, error) {
	e := envs["minio"]
	ak, err := os.ReadFile(e.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"))
	if err != nil {
		return nil, err
	}
	sk, err := os.ReadFile(e.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE"))
	if err != nil {
		return nil, err
	}
	return minio.New(e.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), &minio.Options{
		Creds: credentials.NewStaticV4(strings.TrimSpace(string(ak)), strings.TrimSpace(string(sk)), ""), Region: "us-east-1"})
}

// alterS3 overwrites every canary object of the target's running process
// (its run prefix, from /status.json) with other bytes of the same size.
// Only that prefix: objects other runs left behind are not the probe's, and
// going through them first let the probe replace its own objects between the
// listing and their overwrite (seen once: 152 objects altered, none of them
// read again, no page). The heartbeat is not canary data and is left alone.
func alterS3(ctx context.Context, t *testing.T, d *daemon, tg *target) (string, error) {
	mc, err := minioAdmin(t)
	if err != nil {
		return "", err
	}
	prefix, err := d.s3RunPrefix(ctx, tg.name)
	if err != nil {
		return "", err
	}
	var keys []minio.ObjectInfo
	for o := range mc.ListObjects(ctx, s3Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return "", o.Err
		}
		if strings.HasSuffix(o.Key, "/.heartbeat") {
			continue
		}
		keys = append(keys, o)
	}
	n := 0
	for _, o := range keys {
		buf := make([]byte, o.Size)
		_, _ = rand.Read(buf)
		if _, err := mc.PutObject(ctx, s3Bucket, o.Key, bytes.NewReader(buf), o.Size, minio.PutObjectOptions{}); err != nil {
			return "", err
		}
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("s3: no canary objects under %s/%s", s3Bucket, prefix)
	}
	return fmt.Sprintf("all %d canary objects under %s/%s overwritten with other bytes of the same size (the run's heartbeat and the ledger left alone)", n, s3Bucket, prefix), nil
}

// s3RunPrefix is the key prefix of the target's running probe, from the
// namespace /status.json gives (s3://<bucket>/<prefix><instance>/<run>/).
func (d *daemon) s3RunPrefix(ctx context.Context, name string) (string, error) {
	status, body, err := request(ctx, http.MethodGet, d.url+"/status.json", "")
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("/status.json: HTTP %d", status)
	}
	var st struct {
		Targets []struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"targets"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return "", fmt.Errorf("/status.json: %w", err)
	}
	for _, tg := range st.Targets {
		if tg.Name == name {
			p, ok := strings.CutPrefix(tg.Namespace, "s3://"+s3Bucket+"/")
			if !ok || !strings.HasSuffix(p, "/") {
				return "", fmt.Errorf("/status.json: target %s has namespace %q, not a run prefix in bucket %s", name, tg.Namespace, s3Bucket)
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("/status.json: no target %s", name)
}

// cleanupS3 removes every object of the suite's bucket under dbcanary/:
// canary objects, heartbeats and ledger objects of earlier runs, which the
// daemon (killed after its proxies are gone) could not remove, and which its
// collector leaves for abandoned_after (24 h).
func cleanupS3(ctx context.Context, t *testing.T) {
	mc, err := minioAdmin(t)
	if err != nil {
		return
	}
	objs := make(chan minio.ObjectInfo)
	go func() {
		defer close(objs)
		for o := range mc.ListObjects(ctx, s3Bucket, minio.ListObjectsOptions{Prefix: "dbcanary/", Recursive: true}) {
			if o.Err != nil {
				return
			}
			objs <- o
		}
	}()
	for e := range mc.RemoveObjects(ctx, s3Bucket, objs, minio.RemoveObjectsOptions{}) {
		if e.Err != nil {
			t.Logf("s3 cleanup: %s: %v", e.ObjectName, e.Err)
		}
	}
}

// rabbitmqctl runs rabbitmqctl against the stack's broker node (the node
// name and HOME, which holds its Erlang cookie, as test/stack/rabbitmq.sh sets them).
func rabbitmqctl(args ...string) (string, error) {
	dir := os.Getenv("DBCANARY_STACK_DIR")
	if dir == "" {
		dir = "/var/tmp/dbcanary-stack"
	}
	node := os.Getenv("DBCANARY_RABBITMQ_NODENAME")
	if node == "" {
		node = "dbcanary@localhost"
	}
	cmd := exec.Command("/usr/lib/rabbitmq/bin/rabbitmqctl", args...)
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "rabbitmq", "home"), "RABBITMQ_NODENAME="+node)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
