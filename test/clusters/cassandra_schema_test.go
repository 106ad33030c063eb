//go:build integration

package clusters

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	cas "github.com/dbcanary/dbcanary/probes/cassandra"
	"github.com/dbcanary/dbcanary/test/stack"
)

// TestCassandraConcurrentSchema is issue 21's false data-loss page of
// 26 Nov 2026, the way it was found: three targets, each through another
// coordinator, start at once against an empty keyspace and create the canary
// table together. Through three coordinators Cassandra 5.0 can give the table
// one id per coordinator; the schemas then converge on one, and each node
// drops the tables of the other ids with their rows. Each round uses a fresh
// keyspace; the race is counted from the nodes' data directories (one
// mixed_workload-<id> directory per id a node ever had). Whatever the race
// did, no read may be not_found or mismatch, every node must end with one id,
// and a Prepare that failed must have failed with the schema error (cause
// setup), never with a data cause.
//
// "pinned": pin_hosts, one node each (every request, DDL included, goes to
// the target's node: the race is left to detection). "unpinned": hosts: [one
// node each], the ring discovered (dbcanary sends its DDL to the up node with
// the lowest host id: the race should not happen at all).
func TestCassandraConcurrentSchema(t *testing.T) {
	cassandra = useCluster(t, "cassandra-cluster")
	hosts := strings.Split(cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_HOSTS"), ",")
	if len(hosts) < 3 {
		t.Fatalf("cluster hosts %v, want 3", hosts)
	}
	hosts = hosts[:3]
	dc := cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_DC")
	var port int
	if _, err := fmt.Sscan(cassandra.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"), &port); err != nil {
		t.Fatal(err)
	}
	var dataDirs []string
	for i := range hosts {
		// node<i>/cassandra/logs/system.log -> node<i>/cassandra/data/data
		log := cassandra.Get(t, fmt.Sprintf("DBCANARY_TEST_CASSANDRA_NODE%d_LOG", i+1))
		dataDirs = append(dataDirs, filepath.Join(filepath.Dir(filepath.Dir(log)), "data", "data"))
	}

	cl := gocql.NewCluster(hosts...)
	cl.Port = port
	cl.ProtoVersion = 4
	cl.Timeout = 10 * time.Second
	cl.Consistency = gocql.One
	admin, err := cl.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	const rounds = 6
	for _, mode := range []string{"pinned", "unpinned"} {
		t.Run(mode, func(t *testing.T) {
			raced, held, detected := 0, 0, 0
			for r := range rounds {
				res := schemaRound(t, admin, mode, r, schemaSetup{hosts: hosts, port: port, dc: dc, dataDirs: dataDirs})
				if res.ids > 1 {
					raced++
				}
				if res.detected {
					detected++
				}
				if res.held {
					held++
				}
			}
			if !t.Failed() {
				stack.Figure(t, "Cassandra 3 nodes, 3 targets (%s) creating one table at once, %d rounds: the table got several ids in %d rounds; "+
					"a target's Prepare waited for the nodes to agree on its id in %d rounds and failed with the schema error in %d; "+
					"no not_found or mismatch, one id on every node at the end", mode, rounds, raced, held, detected)
			}
		})
	}
}

type schemaSetup struct {
	hosts    []string
	port     int
	dc       string
	dataDirs []string
}

type roundResult struct {
	ids      int  // table ids the nodes ever had (data directories)
	detected bool // a Prepare failed with the schema error
	held     bool // a Prepare waited for the nodes to agree on the table's id
}

// schemaRound runs one round in a fresh, empty keyspace.
func schemaRound(t *testing.T, admin *gocql.Session, mode string, r int, su schemaSetup) roundResult {
	t.Helper()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ks := fmt.Sprintf("dbcanary_schema_%s_%d_%s", mode, r, hex.EncodeToString(suffix))
	if err := admin.Query(fmt.Sprintf("CREATE KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy', '%s': 3}", ks, su.dc)).Exec(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Query("DROP KEYSPACE IF EXISTS " + ks).Exec() })
	if err := admin.AwaitSchemaAgreement(context.Background()); err != nil {
		t.Fatalf("keyspace %s: %v", ks, err)
	}

	type result struct {
		prepErrs []error
		failures map[string]int // op/cause -> count
		data     []error        // failures with a data cause
		ok       int
	}
	results := make([]result, len(su.hosts))
	logs := make([]stack.Log, len(su.hosts))
	var pbs []*cas.Probe
	for i, h := range su.hosts {
		cfg := cas.DefaultConfig
		cfg.Hosts = []string{h}
		cfg.Port = su.port
		cfg.PinHosts = mode == "pinned"
		cfg.LocalDC = su.dc
		cfg.Keyspace = ks
		cfg.Replication = cas.Replication{Class: "NetworkTopologyStrategy", Datacenters: map[string]int{su.dc: 3}}
		cfg.MixedWorkload.ASize = cas.SizeRange{Min: 1, Max: 100}
		cfg.MixedWorkload.BSize = cas.SizeRange{Min: 1, Max: 1000}
		if errs := cfg.Validate(); len(errs) > 0 {
			t.Fatal(errs)
		}
		p, err := cas.New(probes.Target{Name: fmt.Sprintf("cas-node%d", i+1), InstanceID: fmt.Sprintf("schema-%d", i+1), Config: &cfg,
			Logger: slog.New(slog.NewTextHandler(&logs[i], nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		pbs = append(pbs, p)
		results[i].failures = map[string]int{}
	}

	// As the engine runs them: Prepare under the op timeout (5 s), retried
	// with a backoff of 1 s doubling to 5 s; ops only once it succeeded.
	// Inserts start at once (that is when rows went to a losing id), and
	// each is read back.
	// prepare is the engine's gate: Prepare under the op timeout (5 s),
	// retried with a backoff of 1 s doubling to 5 s.
	prepare := func(i int, p *cas.Probe) bool {
		deadline := time.Now().Add(2 * time.Minute)
		wait := time.Second
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := p.Prepare(ctx)
			cancel()
			if err == nil {
				return true
			}
			results[i].prepErrs = append(results[i].prepErrs, err)
			if time.Now().After(deadline) {
				return false
			}
			<-time.After(wait)
			wait = min(2*wait, 5*time.Second)
		}
	}
	op := func(i int, p *cas.Probe, name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var out probes.Outcome
		err := p.Run(ctx, name, &out)
		if errors.Is(err, probes.ErrNamespaceGone) { // the engine prepares again
			defer prepare(i, p)
		}
		switch c := probes.CauseOf(err); {
		case err == nil:
			results[i].ok++
		case c.DataCause():
			results[i].data = append(results[i].data, fmt.Errorf("%s: %w", name, err))
		default:
			results[i].failures[name+"/"+string(c)]++
		}
	}
	// The targets start within 2 s of each other, as a fleet rolled out at
	// once does: a target that finds the table another one just created
	// (and whose id may still lose to a third's) is the one that lost rows.
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range pbs {
		offset := time.Duration(mrand.Int64N(int64(2 * time.Second)))
		wg.Go(func() {
			<-start
			<-time.After(offset)
			if !prepare(i, p) {
				return
			}
			for range 15 {
				op(i, p, cas.OpInsert)
				op(i, p, cas.OpRead)
			}
		})
	}
	close(start)
	wg.Wait()

	// Rows under an id that lost are dropped when the node adopts the winner:
	// wait until every node reports one id, then read again.
	var final map[string]string
	enginetest.WaitFor(t, time.Minute, ks+": every node reporting one table id", func() bool {
		final = tableIDs(t, admin, ks)
		return len(final) == len(su.hosts) && len(distinct(final)) == 1
	})
	for i, p := range pbs {
		for range 30 {
			op(i, p, cas.OpRead)
		}
	}

	var dirs []string
	ids := map[string]bool{}
	for n, d := range su.dataDirs {
		entries, _ := os.ReadDir(filepath.Join(d, ks))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "mixed_workload-") {
				dirs = append(dirs, fmt.Sprintf("node%d:%s", n+1, strings.TrimPrefix(e.Name(), "mixed_workload-")[:8]))
				ids[e.Name()] = true
			}
		}
	}
	res := roundResult{ids: len(ids)}
	var summary []string
	for i, rr := range results {
		name := fmt.Sprintf("cas-node%d", i+1)
		for _, err := range rr.prepErrs {
			c := probes.CauseOf(err)
			schema := strings.Contains(err.Error(), "schema disagreement") || strings.Contains(err.Error(), "waiting for schema agreement")
			switch {
			case schema && c == probes.CauseSetup:
				res.detected = true
				t.Logf("%s: Prepare held back: %v", name, err)
			case c == probes.CauseTimeout:
				t.Logf("%s: Prepare timed out (retried): %v", name, err) // a loaded machine: the engine retries too
			default:
				t.Errorf("%s: Prepare failed with cause %s, want the schema error (setup) or a timeout: %v", name, c, err)
			}
		}
		if strings.Contains(logs[i].String(), "held the canary back until the nodes agreed") {
			res.held = true
			t.Logf("%s: %s", name, grepLines(logs[i].String(), "held the canary back"))
		}
		for _, err := range rr.data {
			t.Errorf("%s: false data-loss failure: %v", name, err)
		}
		if rr.ok == 0 {
			t.Errorf("%s: no op succeeded (Prepare errors: %v)", name, rr.prepErrs)
		}
		summary = append(summary, fmt.Sprintf("%s %d ok, other failures %v, %d Prepare errors", name, rr.ok, rr.failures, len(rr.prepErrs)))
	}
	t.Logf("round %d (%s): table ids ever created %d (%s), final id %v; %s", r, ks, len(ids), strings.Join(dirs, " "), distinct(final), strings.Join(summary, "; "))
	return res
}

// tableIDs is the canary table's id on every node (query pinned to each),
// by node address; a node without the table is absent.
func tableIDs(t *testing.T, s *gocql.Session, ks string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, h := range s.GetHosts() {
		var id gocql.UUID
		err := s.Query(`SELECT id FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'mixed_workload'`, ks).
			SetHostID(h.HostID()).Scan(&id)
		switch {
		case errors.Is(err, gocql.ErrNotFound):
		case err != nil:
			t.Logf("table id on %s: %v", h.ConnectAddress(), err)
		default:
			out[h.ConnectAddress().String()] = id.String()
		}
	}
	return out
}

func distinct(m map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range m {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// grepLines is the lines of text that contain word.
func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
