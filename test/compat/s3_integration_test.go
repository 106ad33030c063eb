//go:build integration

package compat

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/s3"
	"github.com/dbcanary/dbcanary/test/stack"
)

// s3Store is one S3 implementation: its endpoint (with scheme), region, the
// credential files its stack script wrote, and the CA file for https.
type s3Store struct {
	name, endpoint, region string
	keyFile, secretFile    string
	caFile                 string
	// checksRegion: the store refuses a request signed for another region.
	checksRegion bool
}

func newS3Store(t *testing.T, name string, env stack.Env, endpoint, caFile string) s3Store {
	t.Helper()
	return s3Store{
		name: name, endpoint: endpoint, region: env.Get(t, "DBCANARY_TEST_S3_REGION"),
		keyFile: env.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), secretFile: env.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE"),
		caFile: caFile,
	}
}

// admin is a client with the store's admin credentials, for setting up
// buckets and looking behind the canary's back. It signs payloads (no
// streaming upload) and trusts the test's CA.
func (st s3Store) admin(t *testing.T) *minio.Client {
	t.Helper()
	read := func(f string) string {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	host, secure := strings.TrimPrefix(st.endpoint, "http://"), false
	if h, ok := strings.CutPrefix(st.endpoint, "https://"); ok {
		host, secure = h, true
	}
	opts := &minio.Options{
		Creds:  credentials.NewStaticV4(read(st.keyFile), read(st.secretFile), ""),
		Secure: secure, Region: st.region, BucketLookup: minio.BucketLookupPath,
	}
	if st.caFile != "" {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(st.caFile)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("CA file %s: %v", st.caFile, err)
		}
		opts.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	c, err := minio.New(host, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keys lists a bucket.
func (st s3Store) keys(t *testing.T, bucket string) []string {
	t.Helper()
	var keys []string
	for o := range st.admin(t).ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", bucket, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// bucket creates a fresh bucket for one test and removes it at the end.
func (st s3Store) bucket(t *testing.T, name string) string {
	t.Helper()
	c, ctx := st.admin(t), context.Background()
	empty := func() {
		for _, k := range st.keys(t, name) {
			_ = c.RemoveObject(ctx, name, k, minio.RemoveObjectOptions{})
		}
	}
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: st.region}); err != nil {
		if ok, _ := c.BucketExists(ctx, name); !ok {
			t.Fatal(err)
		}
		empty()
	}
	t.Cleanup(func() { empty(); _ = c.RemoveBucket(ctx, name) })
	return name
}

// writerFunc is an io.Writer from a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// removeBucket empties and removes a bucket if it exists.
func (st s3Store) removeBucket(t *testing.T, name string) {
	t.Helper()
	c, ctx := st.admin(t), context.Background()
	if ok, _ := c.BucketExists(ctx, name); !ok {
		return
	}
	for _, k := range st.keys(t, name) {
		_ = c.RemoveObject(ctx, name, k, minio.RemoveObjectOptions{})
	}
	if err := c.RemoveBucket(ctx, name); err != nil {
		t.Fatalf("remove bucket %s: %v", name, err)
	}
}

// yaml is a one-target config for the store; extra lines go into the s3 section.
func (st s3Store) yaml(target, bucket, ops string, extra ...string) string {
	tlsLine := ""
	if st.caFile != "" {
		tlsLine = "\n      tls: {ca_file: " + st.caFile + "}"
	}
	more := ""
	for _, e := range extra {
		more += "\n      " + e
	}
	return fmt.Sprintf(`
global: {instance_id: compat-1, timeout: 30s, max_in_flight: 8}
targets:
  - name: %s
    backend: s3
    ops: {%s}
    s3:
      endpoint: %s
      region: %s
      addressing: path
      bucket: %s
      access_key_id_file: %s
      secret_access_key_file: %s%s%s
`, target, ops, st.endpoint, st.region, bucket, st.keyFile, st.secretFile, tlsLine, more)
}

// probe builds the s3 probe of a one-target config.
func (st s3Store) probe(t *testing.T, yaml string) probes.Probe {
	t.Helper()
	return st.probeLogging(t, yaml, enginetest.Logger())
}

// probeLogging builds the s3 probe of a one-target config with a logger.
func (st s3Store) probeLogging(t *testing.T, yaml string, logger *slog.Logger) probes.Probe {
	t.Helper()
	cfg := enginetest.Parse(t, yaml)
	tg := cfg.Targets[0]
	p, err := s3.New(probes.Target{Name: tg.Name, InstanceID: "compat-1", Config: tg.Probe, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// s3Row is the compatibility row every S3 implementation gets: every op at
// the defaults (sizes 4KiB to 8MiB, so single and multipart PUTs; list with
// its consistency check), the durability ledger, a wrong secret key (auth),
// over https a client trusting another CA (tls), a request signed for another
// region (auth where the store checks it) and a missing bucket with
// create_bucket false (setup).
func s3Row(t *testing.T, st s3Store) {
	t.Run("every op", func(t *testing.T) {
		b := st.bucket(t, "dbcanary-compat-"+st.name+"-ops")
		t0 := time.Now()
		everyOp(t, st.yaml(st.name, b, `"*": {rate: 1}, ledger_write: {rate: 0}, ledger_check: {rate: 0}`), 3, 3*time.Minute)
		t.Logf("every op 3 times in %s", time.Since(t0).Round(100*time.Millisecond))
		t0 = time.Now()
		defer func() {
			t.Logf("the canary's objects gone from the listing %s after it stopped", time.Since(t0).Round(100*time.Millisecond))
		}()
		// Stopped, the canary removed its objects (the heartbeat stays for the collector).
		var left []string
		enginetest.WaitFor(t, 60*time.Second, "the canary's objects removed", func() bool {
			left = left[:0]
			for _, k := range st.keys(t, b) {
				if !strings.HasSuffix(k, "/.heartbeat") {
					left = append(left, k)
				}
			}
			return len(left) == 0
		})
	})
	t.Run("ledger", func(t *testing.T) {
		b := st.bucket(t, "dbcanary-compat-"+st.name+"-ledger")
		ledgerRow(t, st.yaml(st.name+"-ledger", b, ledgerOps, "ledger: {ages: [10s]}"), st.name+"-ledger")
	})
	t.Run("wrong secret", func(t *testing.T) {
		b := st.bucket(t, "dbcanary-compat-"+st.name+"-auth")
		wrong := fmt.Sprintf("wrong-secret-%d", time.Now().UnixNano())
		secret := filepath.Join(t.TempDir(), "secret")
		writeFile(t, secret, []byte(wrong+"\n"))
		bad := st
		bad.secretFile = secret
		p := bad.probe(t, bad.yaml(st.name+"-auth", b, ""))
		for _, op := range []string{"prepare", "put_4KiB"} {
			var err error
			if op == "prepare" {
				err = prepare(p, 30*time.Second)
			} else {
				err = runOp(p, op, 30*time.Second)
			}
			if probes.CauseOf(err) != probes.CauseAuth || strings.Contains(err.Error(), wrong) ||
				!strings.Contains(err.Error(), "secret_access_key") || !strings.Contains(err.Error(), b) {
				t.Fatalf("%s with a wrong secret key: cause %q, %v; want auth naming secret_access_key and the bucket, without the secret", op, probes.CauseOf(err), err)
			}
			t.Logf("%s with a wrong secret key: %v", op, err)
		}
	})
	if st.caFile != "" {
		t.Run("another CA", func(t *testing.T) {
			other := st
			other.caFile = filepath.Join(filepath.Dir(st.caFile), "other-ca.pem")
			err := prepare(other.probe(t, other.yaml(st.name+"-ca", "dbcanary-compat-"+st.name+"-ca", "")), 30*time.Second)
			if probes.CauseOf(err) != probes.CauseTLS || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
				t.Fatalf("prepare trusting another CA: cause %q, %v; want tls naming the unknown authority", probes.CauseOf(err), err)
			}
			t.Logf("prepare trusting another CA: %v", err)
		})
	}
	t.Run("wrong region", func(t *testing.T) {
		b := st.bucket(t, "dbcanary-compat-"+st.name+"-region")
		other := st
		other.region = "gra" // an OVH region; the stores here are us-east-1
		err := prepare(other.probe(t, other.yaml(st.name+"-region", b, "")), 30*time.Second)
		if !st.checksRegion {
			if err != nil {
				t.Fatalf("prepare signed for another region on a store that ignores the region: %v", err)
			}
			t.Logf("%s accepts requests signed for any region", st.name)
			return
		}
		if probes.CauseOf(err) != probes.CauseAuth || !strings.Contains(err.Error(), "check region") {
			t.Fatalf("prepare signed for another region: cause %q, %v; want auth saying to check region", probes.CauseOf(err), err)
		}
		t.Logf("prepare signed for another region: %v", err)
	})
	t.Run("missing bucket", func(t *testing.T) {
		missing := "dbcanary-compat-" + st.name + "-nobucket"
		st.removeBucket(t, missing)
		p := st.probe(t, st.yaml(st.name+"-nobucket", missing, "", "create_bucket: false"))
		err := prepare(p, 30*time.Second)
		if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), `bucket "`+missing+`" does not exist`) {
			t.Fatalf("prepare with a missing bucket: cause %q, %v; want setup naming the bucket", probes.CauseOf(err), err)
		}
		t.Logf("prepare with a missing bucket: %v", err)
		for _, op := range []string{"put_4KiB", "list"} {
			err := runOp(p, op, 30*time.Second)
			if probes.CauseOf(err) != probes.CauseSetup || !errors.Is(err, probes.ErrNamespaceGone) {
				t.Fatalf("%s with a missing bucket: cause %q, %v; want setup", op, probes.CauseOf(err), err)
			}
			t.Logf("%s with a missing bucket: %v", op, err)
		}
		if ok, _ := st.admin(t).BucketExists(context.Background(), missing); ok {
			st.removeBucket(t, missing)
			t.Fatal("a bucket was created with create_bucket false")
		}
	})
}

// TestSeaweedFS is SeaweedFS's S3 gateway (test/stack/seaweedfs.sh, built
// from the Go module proxy), a second S3 implementation besides MinIO and
// Swift, over plain http.
func TestSeaweedFS(t *testing.T) {
	env, err := stack.Start("seaweedfs")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SeaweedFS %s", env.Get(t, "DBCANARY_TEST_SEAWEEDFS_VERSION"))
	st := newS3Store(t, "seaweedfs", env, "http://"+env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), "")
	s3Row(t, st)
	// SeaweedFS has the lifecycle API (Swift's s3api has not): Prepare's rule
	// must be there as written.
	t.Run("lifecycle", func(t *testing.T) {
		b := st.bucket(t, "dbcanary-compat-seaweedfs-lc")
		p := st.probe(t, st.yaml("seaweedfs-lc", b, ""))
		if err := prepare(p, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		lc, err := st.admin(t).GetBucketLifecycle(context.Background(), b)
		if err != nil || len(lc.Rules) != 1 {
			t.Fatalf("lifecycle after Prepare: %+v, %v; want one rule", lc, err)
		}
		r := lc.Rules[0]
		prefix := r.RuleFilter.Prefix
		if prefix == "" {
			prefix = r.Prefix
		}
		if prefix != "dbcanary/seaweedfs-lc/" || r.Expiration.Days != 1 {
			t.Fatalf("lifecycle rule %+v: want prefix dbcanary/seaweedfs-lc/ expiring after 1 day", r)
		}
		t.Logf("lifecycle rule as SeaweedFS returns it: prefix %s, expiration %d days, noncurrent %d days, abort incomplete uploads after %d days",
			prefix, r.Expiration.Days, r.NoncurrentVersionExpiration.NoncurrentDays, r.AbortIncompleteMultipartUpload.DaysAfterInitiation)
	})
}

// TestSwiftHTTPS is OpenStack Swift's s3api (Debian's Swift, test/stack/swift.sh)
// over https: a private cluster on ports of its own whose second proxy
// process serves TLS with a certificate of a CA this test makes.
func TestSwiftHTTPS(t *testing.T) {
	dir := t.TempDir()
	serverCert(t, dir)
	env := startPrivate(t, "swift", "swift-https", "DBCANARY_SWIFT_TLS_DIR="+dir,
		"DBCANARY_SWIFT_PORT=17280", "DBCANARY_SWIFT_TLS_PORT=17243", "DBCANARY_SWIFT_OBJECT_PORT=17210",
		"DBCANARY_SWIFT_CONTAINER_PORT=17211", "DBCANARY_SWIFT_ACCOUNT_PORT=17212", "DBCANARY_SWIFT_MEMCACHED_PORT=17219")
	st := newS3Store(t, "swift-https", env, "https://"+env.Get(t, "DBCANARY_TEST_S3_TLS_ENDPOINT"), filepath.Join(dir, "ca.pem"))
	st.checksRegion = true // s3api's location
	s3Row(t, st)
}

// TestSeaweedFSHTTPS is SeaweedFS's S3 gateway over https (-s3.port.https
// with a certificate of a CA this test makes), a private instance on ports of
// its own using the cached build.
func TestSeaweedFSHTTPS(t *testing.T) {
	if _, err := stack.Script("seaweedfs", "install"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	serverCert(t, dir)
	env := startPrivate(t, "seaweedfs", "seaweedfs-https", "DBCANARY_SEAWEEDFS_TLS_DIR="+dir,
		"DBCANARY_SEAWEEDFS_BIN_DIR="+filepath.Join(stack.DataDir(), "bin"),
		"DBCANARY_SEAWEEDFS_PORT=17383", "DBCANARY_SEAWEEDFS_TLS_PORT=17443", "DBCANARY_SEAWEEDFS_MASTER_PORT=17333",
		"DBCANARY_SEAWEEDFS_VOLUME_PORT=17380", "DBCANARY_SEAWEEDFS_FILER_PORT=17388")
	s3Row(t, newS3Store(t, "seaweedfs-https", env, "https://"+env.Get(t, "DBCANARY_TEST_S3_TLS_ENDPOINT"), filepath.Join(dir, "ca.pem")))
}

// TestSeaweedFSLeastPrivilege: the canary with a SeaweedFS identity allowed
// only Read, Write, List and Tagging on its bucket (seaweedfs.sh's
// dbcanary-canary) runs every op; pointed at a bucket it has no rights on,
// Prepare fails with setup naming the missing permission, never auth.
func TestSeaweedFSLeastPrivilege(t *testing.T) {
	env, err := stack.Start("seaweedfs")
	if err != nil {
		t.Fatal(err)
	}
	st := newS3Store(t, "seaweedfs", env, "http://"+env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), "")
	canary := st
	canary.name = "seaweedfs-canary"
	canary.keyFile = env.Get(t, "DBCANARY_TEST_S3_CANARY_ACCESS_KEY_FILE")
	canary.secretFile = env.Get(t, "DBCANARY_TEST_S3_CANARY_SECRET_KEY_FILE")
	b := st.bucket(t, env.Get(t, "DBCANARY_TEST_S3_CANARY_BUCKET"))
	t.Run("every op", func(t *testing.T) {
		everyOp(t, canary.yaml(canary.name, b, `"*": {rate: 1}, ledger_write: {rate: 0}, ledger_check: {rate: 0}`), 3, 3*time.Minute)
	})
	// PUT ?lifecycle needs SeaweedFS's Admin action: the canary says so once,
	// at warn level, and goes on (its collector removes leftovers).
	t.Run("lifecycle denied", func(t *testing.T) {
		var logs bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(b)
		}), &slog.HandlerOptions{Level: slog.LevelInfo}))
		p := canary.probeLogging(t, canary.yaml(canary.name+"-lc", b, ""), logger)
		for range 2 { // a second Prepare (the engine's retry) does not warn again
			if err := prepare(p, 60*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if err := runOp(p, "put_4KiB", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		text := logs.String()
		mu.Unlock()
		if n := strings.Count(text, "level=WARN msg=\"cannot set the lifecycle rule"); n != 1 {
			t.Fatalf("%d lifecycle warnings, want one:\n%s", n, text)
		}
		t.Logf("%s", text)
	})
	t.Run("another bucket", func(t *testing.T) {
		other := st.bucket(t, "dbcanary-compat-seaweedfs-notmine")
		p := canary.probe(t, canary.yaml(canary.name+"-other", other, ""))
		err := prepare(p, 30*time.Second)
		if c := probes.CauseOf(err); c != probes.CauseSetup || !strings.Contains(err.Error(), "missing permission") {
			t.Fatalf("prepare on a bucket the identity has no rights on: cause %q, %v; want setup naming the missing permission", c, err)
		}
		t.Logf("prepare on a bucket the identity has no rights on: %v", err)
	})
}
