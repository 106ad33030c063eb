//go:build integration

package s3

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

// quick makes a probe's heartbeat, collector and abandoned_after fast enough
// for a test (the config validation keeps real values at 13 h and above).
func quick(p *Probe, abandoned time.Duration) *Probe {
	p.abandonedAfter, p.heartbeatEvery = abandoned, 200*time.Millisecond
	p.gcFirstAfter, p.gcEvery = time.Hour, time.Hour // passes are run by the test
	return p
}

func collectOnce(t *testing.T, p *Probe) gcResult {
	t.Helper()
	// Generous: the test checks what a pass deletes, not how fast. A full
	// pass over Swift's S3 API ran past 30s in make test at a load of
	// 10-20 (fresh-clone CI of 7 Dec 18:06).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := p.collect(ctx)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	return res
}

func cycle(t *testing.T, p *Probe, who string) {
	t.Helper()
	for _, op := range []string{"put_4KiB", "put_4KiB", "get_4KiB", "head_4KiB", "delete_4KiB", "list", "put_128KiB", "get_128KiB"} {
		if out, err := run(t, p, op, 20*time.Second); err != nil {
			t.Errorf("%s %s: %v (cause %s)", who, op, err, probes.CauseOf(err))
			_ = out
		}
	}
}

// TestSameInstanceNeverDeletesEachOther: a daemon and a one-shot run with the
// same instance id (a startup check in the pod), and two pods of a rolling
// update with the same name, run at once: starting, running, collecting and
// closing one never deletes an object of another (no not_found anywhere).
func TestSameInstanceNeverDeletesEachOther(t *testing.T) {
	b := bucket(t, "dbcanary-it-same")
	c := minioConfig(t, b)
	c.Sizes = []Size{4 * KiB, 128 * KiB}
	daemon := quick(newProbe(t, "same", c), 2*time.Second)
	pod2 := quick(newProbe(t, "same", c), 2*time.Second)
	for _, p := range []*Probe{daemon, pod2} {
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
	}
	if daemon.Prefix() == pod2.Prefix() || !strings.HasPrefix(daemon.Prefix(), "dbcanary/same/it-1/") {
		t.Fatalf("prefixes %s and %s", daemon.Prefix(), pod2.Prefix())
	}
	cycle(t, daemon, "daemon")
	cycle(t, pod2, "pod2")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, w := range []struct {
		p   *Probe
		who string
	}{{daemon, "daemon"}, {pod2, "pod2"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cycle(t, w.p, w.who)
			}
		}()
	}
	// One-shot runs of the same instance id start, run, and close meanwhile.
	for i := range 3 {
		once := quick(newProbe(t, "same", c), 2*time.Second)
		if err := prepare(t, once); err != nil {
			t.Fatal(err)
		}
		cycle(t, once, "once")
		if err := once.Close(); err != nil {
			t.Fatalf("once %d close: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	// Idle for longer than abandoned_after, every object of both live runs is
	// old: only their fresh heartbeats protect them from each other's collector.
	time.Sleep(2500 * time.Millisecond)
	for _, p := range []*Probe{daemon, pod2} {
		if res := collectOnce(t, p); res.Deleted != 0 || res.Kept < 4 {
			t.Errorf("collector of a live run: %+v", res)
		}
	}
	cycle(t, daemon, "daemon")
	if err := pod2.Close(); err != nil {
		t.Fatal(err)
	}
	cycle(t, daemon, "daemon")
	for _, k := range objects(t, admin(t), b) {
		if !strings.HasPrefix(k, daemon.Prefix()) {
			t.Errorf("left after the other runs closed: %s", k)
		}
	}
	if err := daemon.Close(); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, b)
}

// TestCollectorRemovesAbandonedRuns: the objects and heartbeat of a run that
// died without Close are removed once its heartbeat is older than
// abandoned_after, within bounded passes; live runs (of any instance, one of
// them with the dead run's instance id), keys of other layouts and keys
// outside the target's prefix are kept.
func TestCollectorRemovesAbandonedRuns(t *testing.T) {
	st := theMinio()
	collectorRemovesAbandonedRuns(t, st, st.bucket(t, "dbcanary-it-gc"), 3*time.Second)
}

// collectorRemovesAbandonedRuns is TestCollectorRemovesAbandonedRuns on one
// store; abandoned must exceed the time the store takes for the setup (4
// processes, 5 puts each), whose objects the first pass must keep.
func collectorRemovesAbandonedRuns(t *testing.T, st s3Store, b string, abandoned time.Duration) {
	c := st.config(t, b)
	c.Sizes = []Size{4 * KiB, 128 * KiB}
	probe := func(instance string) *Probe {
		p := quick(newProbeAs(t, probes.Target{Name: "gc", InstanceID: instance, Config: c}), abandoned)
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"put_4KiB", "put_4KiB", "put_128KiB", "put_128KiB", "put_128KiB"} {
			mustRun(t, p, op)
		}
		return p
	}
	dead := probe("pod-a")
	dead.stopBackground() // killed: no Close, no more heartbeats
	deadKeys := withPrefix(objects(t, st.admin(t), b), dead.Prefix())
	if len(deadKeys) != 6 {
		t.Fatalf("dead run wrote %v", deadKeys)
	}
	restarted := probe("pod-a") // the same pod name back, a new process
	live := probe("pod-b")
	collector := probe("pod-c")
	ctx := context.Background()
	foreign := []string{
		"dbcanary/gc/pod-a/notes.txt", "dbcanary/gc/README", "dbcanary/gc/pod-a/0123456789abcdef/4KiB/x",
		"dbcanary/gcx/pod-z/0123456789abcdef/4KiB/00000001", "dbcanary/other/pod-a/4KiB/0123abcd-00000001", "elsewhere/x",
	}
	oldLayout := "dbcanary/gc/pod-old/4KiB/0123abcd-00000001" // written before heartbeats existed
	for _, k := range append(slices.Clone(foreign), oldLayout) {
		if _, err := st.admin(t).PutObject(ctx, b, k, bytes.NewReader([]byte("x")), 1, putOptions("")); err != nil {
			t.Fatal(err)
		}
	}
	// Everything is younger than abandoned_after: nothing goes.
	if res := collectOnce(t, collector); res.Deleted != 0 {
		t.Fatalf("first pass deleted %d objects: %+v", res.Deleted, res)
	}
	// abandoned_after, plus the collector's "now" being up to 1 s early (the
	// heartbeat's Last-Modified header has whole seconds), plus slack.
	time.Sleep(abandoned + 1500*time.Millisecond)
	// Bounded passes: 4 keys listed per pass; the collector resumes where it stopped.
	collector.gcMaxListed = 4
	passes, deleted := 0, 0
	for {
		res := collectOnce(t, collector)
		passes++
		deleted += res.Deleted
		if res.Listed > 4 {
			t.Fatalf("a pass listed %d keys, bound 4", res.Listed)
		}
		if res.Done || passes > 50 {
			break
		}
	}
	t.Logf("%d passes deleted %d objects", passes, deleted)
	keys := objects(t, st.admin(t), b)
	for _, k := range append(deadKeys, oldLayout) {
		if slices.Contains(keys, k) {
			t.Errorf("abandoned %s kept", k)
		}
	}
	if deleted != len(deadKeys)+1 {
		t.Errorf("deleted %d objects, want the %d of the dead run and the old-layout one", deleted, len(deadKeys))
	}
	for _, k := range foreign {
		if !slices.Contains(keys, k) {
			t.Errorf("foreign key %s deleted", k)
		}
	}
	for _, p := range []*Probe{restarted, live, collector} {
		if n := len(withPrefix(keys, p.Prefix())); n != 6 {
			t.Errorf("live run %s has %d objects left, want 6", p.Prefix(), n)
		}
		for _, op := range []string{"get_4KiB", "head_4KiB", "get_128KiB", "list"} {
			mustRun(t, p, op)
		}
	}
	// A full pass of a live collector over live runs only deletes nothing.
	collector.gcMaxListed = gcMaxListed
	if res := collectOnce(t, live); res.Deleted != 0 {
		t.Errorf("pass over live runs: %+v", res)
	}
	for _, p := range []*Probe{restarted, live, collector} {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	keys = objects(t, st.admin(t), b)
	slices.Sort(foreign)
	if !slices.Equal(keys, foreign) {
		t.Errorf("left: %v, want only %v", keys, foreign)
	}
	removeAll(t, st.admin(t), b)
}

func withPrefix(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// TestEphemeralCloseRemovesEverything: a one-shot run leaves nothing behind,
// heartbeat included, runs no collector, and its Close is bounded in time
// even when the store stops answering.
func TestEphemeralCloseRemovesEverything(t *testing.T) {
	b := bucket(t, "dbcanary-it-ephemeral")
	c := minioConfig(t, b)
	p := newProbeAs(t, probes.Target{Name: "eph", InstanceID: "it-1-once-abc123", Ephemeral: true, Config: c})
	p.heartbeatEvery, p.gcFirstAfter = 100*time.Millisecond, 0
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"put_4KiB", "get_1MiB", "head_8MiB", "delete_128KiB", "put_8MiB", "list"} {
		mustRun(t, p, op)
	}
	time.Sleep(300 * time.Millisecond) // heartbeats, and a collector pass were it a daemon
	if n := p.gcPasses.Load(); n != 0 {
		t.Errorf("a one-shot run made %d collector passes", n)
	}
	if len(objects(t, admin(t), b)) < 5 {
		t.Fatal("the run wrote less than expected")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, b)

	// A store that stops answering: Close gives up after closeTimeout.
	tc := toxiproxy.NewClient(toxiEnv.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	name := "dbcanary_s3_ephemeral_it"
	if old, err := tc.Proxy(name); err == nil {
		_ = old.Delete()
	}
	proxy, err := tc.CreateProxy(name, "127.0.0.1:0", s3Env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Delete()
	c = minioConfig(t, b)
	c.Endpoint = "http://" + proxy.Listen
	p = newProbeAs(t, probes.Target{Name: "eph", InstanceID: "it-1-once-def456", Ephemeral: true, Config: c})
	p.closeTimeout = 2 * time.Second
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, "put_4KiB")
	p.tr.CloseIdleConnections()
	if _, err := proxy.AddToxic("hang", "timeout", "downstream", 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = p.Close()
	took := time.Since(start)
	t.Logf("close against a hung store: %s, %v", took, err)
	if err == nil || took > 4*time.Second {
		t.Errorf("close against a hung store took %s: %v", took, err)
	}
	_ = proxy.RemoveToxic("hang")
	removeAll(t, admin(t), b)
}

// TestNamespaceBoundedAsInstancesComeAndGo: pods come and go with a new
// instance id each (a rollout), each killed without Close; the background
// collector of the newest keeps the target's prefix to the live run and the
// runs not yet abandoned, whatever the number of generations.
func TestNamespaceBoundedAsInstancesComeAndGo(t *testing.T) {
	b := bucket(t, "dbcanary-it-bounded")
	c := minioConfig(t, b)
	c.Sizes = []Size{4 * KiB}
	c.MaxObjectsPerSize = 3
	const abandoned = time.Second
	perRun := 2*c.MaxObjectsPerSize*len(c.Sizes) + 1 // objects (at most twice the bound under concurrency) and the heartbeat
	var prev *Probe
	most := 0
	for gen := range 6 {
		p := quick(newProbeAs(t, probes.Target{Name: "bounded", InstanceID: fmt.Sprintf("pod-%d", gen), Config: c}), abandoned)
		p.gcFirstAfter, p.gcEvery = 0, 300*time.Millisecond // the real background collector
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			mustRun(t, p, "put_4KiB")
		}
		if prev != nil {
			prev.stopBackground() // killed
		}
		prev = p
		time.Sleep(abandoned + 700*time.Millisecond)
		n := len(objects(t, admin(t), b))
		most = max(most, n)
		// The live run, the one killed just now (not yet abandoned), and at
		// most one more whose heartbeat aged while the collector waited.
		if n > 3*perRun {
			t.Errorf("generation %d: %d objects under the prefix, bound %d", gen, n, 3*perRun)
		}
		mustRun(t, p, "get_4KiB")
	}
	t.Logf("6 generations: at most %d objects (%d per run)", most, perRun)
	if err := prev.Close(); err != nil {
		t.Fatal(err)
	}
	removeAll(t, admin(t), b)
}

// TestCollectorRemovesOldLedgerObjects: ledger objects live outside every
// run, so when the instance id changes (a new pod name at a rollout) nothing
// else would remove those of the old one; the collector deletes ledger
// objects older than abandoned_after, keeps younger ones and never touches
// keys that only look alike.
func TestCollectorRemovesOldLedgerObjects(t *testing.T) {
	b := bucket(t, "dbcanary-it-gc-ledger")
	c := minioConfig(t, b)
	c.Sizes = []Size{4 * KiB}
	const abandoned = 3 * time.Second
	probe := func(instance string) *Probe {
		p := quick(newProbeAs(t, probes.Target{Name: "gcl", InstanceID: instance, Config: c}), abandoned)
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := probe("pod-a")
	mustRun(t, gone, "ledger_write")
	mustRun(t, gone, "ledger_write")
	if err := gone.Close(); err != nil { // the pod is replaced: its run goes, its ledger objects stay
		t.Fatal(err)
	}
	goneKeys := withPrefix(objects(t, admin(t), b), "dbcanary/gcl/pod-a/ledger/")
	if len(goneKeys) != 2 {
		t.Fatalf("ledger objects of the replaced pod: %v", goneKeys)
	}
	ctx := context.Background()
	foreign := []string{"dbcanary/gcl/pod-a/ledger/notes.txt", "dbcanary/gcl/pod-a/ledger/0123", "dbcanary/gcl/pod-a/ledger/x/0123456789abcdef"}
	for _, k := range foreign {
		if _, err := admin(t).PutObject(ctx, b, k, bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	live := probe("pod-b")
	if res := collectOnce(t, live); res.Deleted != 0 {
		t.Fatalf("a pass over young ledger objects deleted %d: %+v", res.Deleted, res)
	}
	time.Sleep(abandoned + 1500*time.Millisecond) // server times of two PUTs differ by up to ~0.7 s
	mustRun(t, live, "ledger_write")              // young: kept
	res := collectOnce(t, live)
	keys := objects(t, admin(t), b)
	for _, k := range goneKeys {
		if slices.Contains(keys, k) {
			t.Errorf("ledger object %s older than abandoned_after kept", k)
		}
	}
	if res.Deleted != len(goneKeys) {
		t.Errorf("deleted %d objects, want the %d old ledger objects: %+v", res.Deleted, len(goneKeys), res)
	}
	if n := len(withPrefix(keys, "dbcanary/gcl/pod-b/ledger/")); n != 1 {
		t.Errorf("live ledger objects left: %d, want 1", n)
	}
	for _, k := range foreign {
		if !slices.Contains(keys, k) {
			t.Errorf("foreign key %s deleted", k)
		}
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	removeAll(t, admin(t), b)
}

// TestCollectorAbortsStaleUploads: the collector aborts the canary's
// unfinished multipart uploads older than abandoned_after (a dead run's and
// its own), and keeps younger ones and uploads of keys outside its layout.
func TestCollectorAbortsStaleUploads(t *testing.T) {
	st := theMinio()
	collectorAbortsStaleUploads(t, st, st.bucket(t, "dbcanary-it-uploads"))
}

func collectorAbortsStaleUploads(t *testing.T, st s3Store, b string) {
	c := st.config(t, b)
	c.Sizes = []Size{4 * KiB}
	// Long enough for the uploads to be started and collected once while
	// still young on a loaded machine: at 3 s, CI's Swift took longer than
	// that to start three, and the first was rightly aborted (stop 41).
	const abandoned = 15 * time.Second
	p := quick(newProbeAs(t, probes.Target{Name: "up", InstanceID: "pod-a", Config: c}), abandoned)
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	core := minio.Core{Client: st.admin(t)}
	ctx := context.Background()
	abortAll := func() {
		res, err := core.ListMultipartUploads(ctx, b, "", "", "", uploadsDelimiter, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range res.Uploads {
			_ = core.AbortMultipartUpload(ctx, b, u.Key, u.UploadID)
		}
	}
	abortAll() // uploads are not objects: an earlier run's may be left in the bucket
	defer abortAll()
	start := func(key string) string {
		t.Helper()
		id, err := core.NewMultipartUpload(ctx, b, key, putOptions(""))
		if err != nil {
			t.Fatalf("starting an upload of %s: %v", key, err)
		}
		part := bytes.Repeat([]byte("p"), 1<<10)
		if _, err := core.PutObjectPart(ctx, b, key, id, 1, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{DisableContentSha256: true}); err != nil {
			t.Fatalf("uploading a part of %s: %v", key, err)
		}
		return id
	}
	stale := []string{
		"dbcanary/up/pod-z/0123456789abcdef/8MiB/00000001", // a run that died mid-upload
		p.Prefix() + "8MiB/00000007",                       // a put of this run that failed mid-upload
	}
	foreign := "dbcanary/up/pod-z/notes.bin"
	began := time.Now()
	for _, k := range append(slices.Clone(stale), foreign) {
		start(k)
	}
	list := func() []minio.ObjectMultipartInfo {
		res, err := core.ListMultipartUploads(ctx, b, "", "", "", uploadsDelimiter, 1000)
		if err != nil {
			t.Fatalf("listing uploads: %v", err)
		}
		return res.Uploads
	}
	uploads := func() []string {
		var keys []string
		for _, u := range list() {
			keys = append(keys, u.Key)
		}
		slices.Sort(keys)
		return keys
	}
	switch res := collectOnce(t, p); {
	case time.Since(began) >= abandoned:
		// The uploads may be old enough by now: aborting them is right.
		t.Logf("starting and collecting the uploads took %s, not less than abandoned_after (%s): the young-upload check cannot be judged", time.Since(began).Round(time.Millisecond), abandoned)
	case res.Aborted != 0:
		t.Fatalf("uploads younger than abandoned_after aborted: %+v", res)
	}
	// Wait until the store's clock, as the collector reads it, is abandoned_after past the uploads.
	var initiated time.Time
	if n := len(list()); n != 3 {
		t.Fatalf("%d uploads listed, want 3: %v", n, uploads())
	}
	for _, u := range list() {
		if u.Initiated.After(initiated) {
			initiated = u.Initiated
		}
	}
	enginetest.WaitFor(t, 60*time.Second, "the store's clock abandoned_after past the uploads", func() bool {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		now, err := p.serverNow(sctx)
		return err == nil && now.Sub(initiated) >= abandoned
	})
	young := "dbcanary/up/pod-y/0123456789abcdef/8MiB/00000002"
	start(young)
	res := collectOnce(t, p)
	want := []string{foreign, young}
	slices.Sort(want)
	if got := uploads(); res.Aborted != len(stale) || !slices.Equal(got, want) {
		t.Fatalf("aborted %d, uploads left %v; want %d aborted and %v left", res.Aborted, got, len(stale), want)
	}
	stack.Figure(t, "S3 collector on %s: %d stale canary multipart uploads aborted, a young one and a foreign one kept", st.name, res.Aborted)
}

// TestFreshKeysCloseRemovesEverything: in s3-sizes' fresh-key mode each put
// past max_objects_per_size writes a new object and forgets the oldest; Close
// still deletes every one, over several listings of the run.
func TestFreshKeysCloseRemovesEverything(t *testing.T) {
	b := bucket(t, "dbcanary-it-fresh")
	c := minioConfig(t, b)
	c.Sizes = []Size{KiB}
	c.MaxObjectsPerSize = 3
	c.freshKeys = true
	p := newProbeAs(t, probes.Target{Name: "fresh", InstanceID: "it-1-bench-fresh1", Ephemeral: true, Config: c})
	p.runListed = 10 // three listings and a remainder for 33 objects
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	const puts = 33
	for range puts {
		mustRun(t, p, "put_1KiB")
	}
	mustRun(t, p, "get_1KiB") // the tracked objects still read back
	if n := len(withPrefix(objects(t, admin(t), b), p.Prefix())); n != puts+1 {
		t.Fatalf("%d objects under the run's prefix after %d puts, want %d (every put a new object, and the heartbeat)", n, puts, puts+1)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, b)
}
