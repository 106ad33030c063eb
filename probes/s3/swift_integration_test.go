//go:build integration

package s3

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

// OpenStack Swift with s3api (test/stack/swift.sh) is started once, by the
// first test that needs it, and stopped by TestMain's stack.Cleanup.
var (
	swiftOnce sync.Once
	swiftEnv  stack.Env
	swiftErr  error
)

func theSwift(t *testing.T) s3Store {
	t.Helper()
	swiftOnce.Do(func() { swiftEnv, swiftErr = stack.Start("swift") })
	if swiftErr != nil {
		t.Fatalf("starting Swift: %v", swiftErr)
	}
	return s3Store{"swift", swiftEnv}
}

// swiftScript runs one of swift.sh's verbs (stop-container, ...).
func swiftScript(t *testing.T, verb string) {
	t.Helper()
	if _, err := stack.Script("swift", verb); err != nil {
		t.Fatal(err)
	}
}

// TestSwiftListingLagIsNotDataLoss is "Why" 2 of issue 20: with Swift's
// container server down, PUTs succeed and their listing updates wait as
// async pendings; until swift-object-updater replays them the listing lags
// behind objects that GET and HEAD find. The list op must never call that
// data loss (no not_found, no data cause), and must be ok again once the
// updater caught up.
func TestSwiftListingLagIsNotDataLoss(t *testing.T) {
	st := theSwift(t)
	b := st.bucket(t, "dbcanary-it-swift-lag")
	c := st.config(t, b)
	c.Sizes = []Size{4 * KiB}
	c.MaxObjectsPerSize = 8
	p := newProbe(t, "swift-lag", c)
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	mustRun(t, p, "put_4KiB")
	mustRun(t, p, "list") // the container's info is now in the proxy's cache: PUTs need no container server

	// The container server and the updater are down: the listing updates of
	// these PUTs wait on the object server's disk.
	swiftScript(t, "stop-updater")
	swiftScript(t, "stop-container")
	restarted := false
	defer func() {
		if !restarted {
			swiftScript(t, "start-container")
			swiftScript(t, "start-updater")
		}
	}()
	for range 4 {
		mustRun(t, p, "put_4KiB")
	}
	// The listing itself fails: s3api answers 503 ServiceUnavailable.
	_, err := run(t, p, "list", 20*time.Second)
	if probes.CauseOf(err) != probes.CauseServer || !strings.Contains(err.Error(), "the store is unavailable (HTTP 503") {
		t.Fatalf("list with the container server down: %v (cause %s), want server naming the 503", err, probes.CauseOf(err))
	}
	t.Logf("list with the container server down: %v (cause %s)", err, probes.CauseOf(err))
	// The container server is back, the updater not yet: the listing lags
	// behind 4 objects that HEAD finds.
	swiftScript(t, "start-container")
	for range 3 {
		_, err := run(t, p, "list", 20*time.Second)
		if c := probes.CauseOf(err); c != probes.CauseStale || !strings.Contains(err.Error(), "within listing_grace") {
			t.Fatalf("list while the listing lags: %v (cause %s), want stale within listing_grace: eventual listing consistency is not data loss", err, c)
		}
		t.Logf("list while the listing lags: %v", err)
	}
	// Lagging longer than listing_grace is still not data loss while HEAD finds the objects.
	p.cfg.ListingGrace = 0
	if _, err := run(t, p, "list", 20*time.Second); probes.CauseOf(err) != probes.CauseStale || !strings.Contains(err.Error(), "longer than listing_grace") {
		t.Fatalf("list lagging beyond listing_grace, objects found by HEAD: %v (cause %s), want stale", err, probes.CauseOf(err))
	}
	p.cfg.ListingGrace = DefaultConfig.ListingGrace
	mustRun(t, p, "get_4KiB")
	mustRun(t, p, "head_4KiB")
	// The updater replays the pending updates: list is ok again.
	swiftScript(t, "start-updater")
	restarted = true
	var last error
	enginetest.WaitFor(t, 90*time.Second, "list ok once the object-updater caught up", func() bool {
		_, last = run(t, p, "list", 20*time.Second)
		if last != nil && probes.CauseOf(last).DataCause() {
			t.Fatalf("list while the updater catches up: %v (cause %s)", last, probes.CauseOf(last))
		}
		return last == nil
	})
}

// TestSwift runs every op through the engine, the durability ledger and the
// collector (abandoned runs and stale multipart uploads) against OpenStack
// Swift's s3api over http, and checks that its missing lifecycle API is
// detected and logged once at warn level.
func TestSwift(t *testing.T) {
	st := theSwift(t)
	t.Run("engine", func(t *testing.T) { engineAllSizes(t, st, st.bucket(t, "dbcanary-it-swift-engine")) })
	t.Run("ledger", func(t *testing.T) {
		b := st.bucket(t, "dbcanary-it-swift-ledger")
		testLedgers.SetDir(t.TempDir())
		t.Cleanup(func() { testLedgers.SetDir("") })
		c := st.config(t, b)
		c.Ledger.Ages = []time.Duration{10 * time.Second}
		p := newProbe(t, "swift-ledger", c)
		if err := prepare(t, p); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			mustRun(t, p, probes.OpLedgerWrite)
		}
		if lost := checkUntilEmpty(t, p, 90*time.Second); len(lost) != 0 {
			t.Fatalf("ledger losses on a healthy Swift: %v", lost)
		}
		if got := ledgerCounts(t, "swift-ledger"); got["intact"] != 3 || got["missing"] != 0 || got["corrupted"] != 0 {
			t.Fatalf("ledger checks %v, want 3 intact", got)
		}
		if err := closeProbe(p); err != nil {
			t.Fatal(err)
		}
		st.assertEmpty(t, b) // checked entries are deleted
	})
	t.Run("collector", func(t *testing.T) {
		collectorRemovesAbandonedRuns(t, st, st.bucket(t, "dbcanary-it-swift-gc"), 12*time.Second)
	})
	t.Run("uploads", func(t *testing.T) { collectorAbortsStaleUploads(t, st, st.bucket(t, "dbcanary-it-swift-uploads")) })
	t.Run("store reasons", func(t *testing.T) { swiftStoreReasons(t, st) })
	t.Run("wrong region", func(t *testing.T) {
		c := st.config(t, st.bucket(t, "dbcanary-it-swift-region"))
		c.Region = "gra" // an OVH region; this proxy's s3api location is us-east-1
		err := prepare(t, newProbe(t, "swift-region", c))
		if probes.CauseOf(err) != probes.CauseAuth {
			t.Fatalf("Prepare signed for another region than the proxy's location: %v (cause %s), want auth", err, probes.CauseOf(err))
		}
		t.Logf("wrong region: %v", err)
	})
	t.Run("lifecycle", func(t *testing.T) {
		b := st.bucket(t, "dbcanary-it-swift-lifecycle")
		var logs syncBuffer
		// The engine hands every probe a logger that already carries target and backend.
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("target", "swift-lc", "backend", "s3")
		c := st.config(t, b)
		if errs := c.Validate(); len(errs) != 0 {
			t.Fatal(errs)
		}
		for range 2 { // two processes: each warns once
			p, err := New(probes.Target{Name: "swift-lc", InstanceID: "it-1", Config: c, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // a second Prepare (the engine's retry) does not warn again
				if err := prepare(t, p); err != nil {
					t.Fatal(err)
				}
			}
			mustRun(t, p, "put_4KiB")
			if err := closeProbe(p); err != nil {
				t.Fatal(err)
			}
		}
		text := logs.String()
		want := "level=WARN msg=\"this S3 store has no bucket lifecycle API"
		if n := strings.Count(text, want); n != 2 || !strings.Contains(text, "target=swift-lc") ||
			!strings.Contains(text, "dbcanary's own collector removes") || !strings.Contains(text, "GET ?lifecycle answered with a bucket listing") {
			t.Fatalf("%d warnings, want one per process naming the target and the collector:\n%s", n, text)
		}
		t.Logf("%s", text)
	})
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// swiftStoreReasons reproduces on the real Swift three refusals where the
// store says why: 501 NotImplemented for a streaming (aws-chunked) upload,
// which any other client's default PUT over http draws, 503 SlowDown from
// Swift's rate limit, and a container quota (Swift's container_quotas, 413,
// EntityTooLarge through s3api) as storage full.
func swiftStoreReasons(t *testing.T, st s3Store) {
	b := st.bucket(t, "dbcanary-it-swift-reasons")
	p := newProbe(t, "swift-reasons", st.config(t, b))
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	key := p.Prefix() + "streamed"
	_, err := st.admin(t).PutObject(context.Background(), b, key, bytes.NewReader(make([]byte, 1024)), 1024, minio.PutObjectOptions{})
	err = p.classify("put", key, err)
	if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), "streaming (aws-chunked) uploads") {
		t.Fatalf("a streaming PUT: %v (cause %s), want setup naming aws-chunked", err, probes.CauseOf(err))
	}
	t.Logf("501: %v", err)

	// SlowDown: swift.sh rate-limits listings of containers of 100 objects
	// or more (Swift's ratelimit middleware answers 498, s3api SlowDown).
	// The canary's run prefix sits in a bucket with 100 other objects.
	fillers := func(del bool) {
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < 100; i += 8 {
					var err error
					if key := fmt.Sprintf("filler/%03d", i); del {
						err = st.admin(t).RemoveObject(context.Background(), b, key, minio.RemoveObjectOptions{})
					} else {
						_, err = st.admin(t).PutObject(context.Background(), b, key, bytes.NewReader([]byte("x")), 1, putOptions(""))
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	fillers(false)
	enginetest.WaitFor(t, 60*time.Second, "a list refused with SlowDown", func() bool {
		// A HEAD of the bucket refreshes the proxy's cached object count, which the rate limit reads.
		_, _ = st.admin(t).BucketExists(context.Background(), b)
		_, err = run(t, p, "list", 20*time.Second)
		return err != nil && s3Code(err) == "SlowDown"
	})
	if probes.CauseOf(err) != probes.CauseServer || !strings.Contains(err.Error(), "SlowDown: the store asks clients to reduce their request rate") {
		t.Fatalf("a rate-limited list: %v (cause %s), want server naming SlowDown", err, probes.CauseOf(err))
	}
	t.Logf("SlowDown: %v", err)
	fillers(true)
	enginetest.WaitFor(t, 60*time.Second, "listings allowed again below 100 objects", func() bool {
		_, _ = st.admin(t).BucketExists(context.Background(), b)
		_, err := run(t, p, "list", 20*time.Second)
		return err == nil
	})

	// A container quota of 1 byte through Swift's own API (tempauth token).
	storage, token := swiftToken(t, st)
	req, _ := http.NewRequest(http.MethodPost, storage+"/"+b, nil)
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("X-Container-Meta-Quota-Bytes", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("setting the container quota: %v %v", resp, err)
	}
	resp.Body.Close()
	defer func() {
		req.Header.Set("X-Container-Meta-Quota-Bytes", "")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	enginetest.WaitFor(t, 30*time.Second, "a put refused by the quota", func() bool {
		_, err = run(t, p, "put_4KiB", 20*time.Second)
		return err != nil
	})
	if probes.CauseOf(err) != probes.CauseServer || !strings.Contains(err.Error(), "storage full") {
		t.Fatalf("a put over the container quota: %v (cause %s), want server naming storage full", err, probes.CauseOf(err))
	}
	t.Logf("quota: %v", err)
}

// swiftToken logs in to Swift's tempauth with the S3 key's user and returns
// the account's storage URL and a token.
func swiftToken(t *testing.T, st s3Store) (string, string) {
	t.Helper()
	user, key := st.creds(t)
	req, _ := http.NewRequest(http.MethodGet, "http://"+st.env.Get(t, "DBCANARY_TEST_S3_ENDPOINT")+"/auth/v1.0", nil)
	req.Header.Set("X-Auth-User", user)
	req.Header.Set("X-Auth-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	storage, token := resp.Header.Get("X-Storage-Url"), resp.Header.Get("X-Auth-Token")
	if resp.StatusCode/100 != 2 || storage == "" || token == "" {
		t.Fatalf("tempauth login: %s", resp.Status)
	}
	return storage, token
}
