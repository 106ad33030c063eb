//go:build soakchaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/dbcanary/dbcanary/test/chaos/history"
	"github.com/dbcanary/dbcanary/test/stack"
)

// The stores' bounds on canary data, as configured for the run (the
// probes' defaults unless daemon.go's render sets them).
const (
	casTTL       = time.Hour      // cassandra ttl: every write carries it
	osRetention  = 48 * time.Hour // opensearch retention: a daily index kept this long after its day
	mqExpires    = 30 * time.Minute
	mqMaxLength  = 1000 // x-max-length of each canary queue
	mqQueuesEach = 2    // the canary queue and the ledger queue of the one instance id
)

// leftovers lists what every store still holds of the canary after the
// daemon stopped, against the bound each store is configured with.
func leftovers(ctx context.Context, tp *topology) []history.Leftover {
	node1Home := filepath.Join(filepath.Dir(tp.mq["DBCANARY_TEST_RABBITMQ_NODE1_PIDFILE"]), "home")
	return []history.Leftover{s3Leftover(ctx, "minio", tp.minio), s3Leftover(ctx, "swift", tp.swiftEnv), casLeftover(tp), osLeftover(ctx, tp),
		mqLeftover(ctx, tp.mq["DBCANARY_TEST_RABBITMQ_NODE1_NAME"], node1Home, targetMQ),
		mqLeftover(ctx, lossyNode, filepath.Join(tp.lossy.dir, "rabbitmq", "home"), targetMQLossy)}
}

// s3Leftover lists what the canary left in its bucket after the daemon
// stopped: a run's objects are removed by the collector once its heartbeat
// is older than abandoned_after (the S3 default, 24h).
func s3Leftover(ctx context.Context, store string, e stack.Env) history.Leftover {
	l := history.Leftover{Store: store + " (bucket " + s3Bucket + ")", Allow: history.Duration(24 * time.Hour)}
	read := func(key string) string { b, _ := os.ReadFile(e[key]); return strings.TrimSpace(string(b)) }
	c, err := minio.New(e["DBCANARY_TEST_S3_ENDPOINT"], &minio.Options{Region: e["DBCANARY_TEST_S3_REGION"], BucketLookup: minio.BucketLookupPath,
		Creds: credentials.NewStaticV4(read("DBCANARY_TEST_S3_ACCESS_KEY_FILE"), read("DBCANARY_TEST_S3_SECRET_KEY_FILE"), "")})
	if err != nil {
		l.Problem = err.Error()
		return l
	}
	return history.ListS3(ctx, c, l, s3Bucket, time.Now(), 3*time.Minute, time.Second)
}

// casLeftover reads the write time of every canary row: Cassandra returns
// no expired row, so a row older than the ttl is one written without it.
func casLeftover(tp *topology) history.Leftover {
	l := history.Leftover{Store: "cassandra (keyspace " + casKeyspace + ")", Allow: history.Duration(casTTL)}
	port, _ := strconv.Atoi(tp.cas["DBCANARY_TEST_CASSANDRA_PORT"])
	c := gocql.NewCluster(strings.Split(tp.cas["DBCANARY_TEST_CASSANDRA_HOSTS"], ",")...)
	c.Port, c.Timeout, c.ConnectTimeout, c.Consistency = port, 20*time.Second, 20*time.Second, gocql.One
	s, err := c.CreateSession()
	if err != nil {
		l.Problem = "no session: " + err.Error()
		return l
	}
	defer s.Close()
	now := time.Now()
	for _, q := range []string{"SELECT writetime(a) FROM " + casKeyspace + ".mixed_workload"} {
		it := s.Query(q).PageSize(1000).Iter()
		var wt int64
		for it.Scan(&wt) {
			l.Items++
			l.Oldest = max(l.Oldest, history.Duration(now.Sub(time.UnixMicro(wt))))
		}
		if err := it.Close(); err != nil {
			l.Problem = q + ": " + err.Error()
		}
	}
	return l
}

// osLeftover lists the canary's daily indices by creation date: retention
// deletes one once its day ended retention ago, so none is older than
// retention plus the day itself.
func osLeftover(ctx context.Context, tp *topology) history.Leftover {
	prefix := "dbcanary-" + targetOS + "-"
	l := history.Leftover{Store: "opensearch (indices " + prefix + "*)", Allow: history.Duration(osRetention + 24*time.Hour)}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tp.osURL+"/_cat/indices/"+prefix+"*?format=json&h=index,creation.date,docs.count", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.Problem = err.Error()
		return l
	}
	defer resp.Body.Close()
	var rows []struct {
		Index   string `json:"index"`
		Created string `json:"creation.date"`
		Docs    string `json:"docs.count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil || resp.StatusCode != http.StatusOK {
		l.Problem = fmt.Sprintf("_cat/indices: HTTP %d %v", resp.StatusCode, err)
		return l
	}
	var docs int
	for _, r := range rows {
		ms, _ := strconv.ParseInt(r.Created, 10, 64)
		n, _ := strconv.Atoi(r.Docs)
		l.Items, docs = l.Items+1, docs+n
		l.Oldest = max(l.Oldest, history.Duration(time.Since(time.UnixMilli(ms))))
	}
	l.Detail = fmt.Sprintf("(%d documents)", docs)
	return l
}

// mqLeftover lists the target's canary queues through node name: the one
// instance id owns two (canary and ledger), each at most max_length deep;
// x-expires deletes them queue_expires after the last consumer went.
func mqLeftover(ctx context.Context, name, home, target string) history.Leftover {
	l := history.Leftover{Store: "rabbitmq (queues dbcanary." + target + ".*)", Allow: history.Duration(mqExpires), MaxItems: mqQueuesEach}
	cmd := exec.CommandContext(ctx, "/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", name, "list_queues", "name", "messages", "arguments", "--formatter", "json")
	cmd.Env = append(os.Environ(), "HOME="+home, "ERL_EPMD_ADDRESS=127.0.0.1")
	out, err := cmd.Output()
	if err != nil {
		l.Problem = fmt.Sprintf("rabbitmqctl list_queues: %v", err)
		return l
	}
	qs, err := history.ParseQueues(out)
	if err != nil {
		l.Problem = fmt.Sprintf("rabbitmqctl list_queues: %v: %.200s", err, out)
		return l
	}
	var msgs []string
	for _, q := range qs {
		if !strings.HasPrefix(q.Name, "dbcanary."+target+".") {
			continue
		}
		l.Items++
		msgs = append(msgs, fmt.Sprintf("%s: %d messages", q.Name, q.Messages))
		if q.Messages > mqMaxLength {
			l.Problem = fmt.Sprintf("%s holds %d messages, above x-max-length %d", q.Name, q.Messages, mqMaxLength)
		}
		if _, ok := q.Args["x-expires"]; !ok {
			l.Problem = q.Name + " has no x-expires: it would stay for good"
		}
	}
	l.Detail = "(" + strings.Join(msgs, "; ") + ")"
	return l
}
