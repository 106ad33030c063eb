//go:build integration

package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

var (
	s3Env   stack.Env
	toxiEnv stack.Env
)

func TestMain(m *testing.M) {
	s3Env = stack.Must("minio")
	toxiEnv = stack.Must("toxiproxy")
	stack.Exit(m.Run())
}

// s3Store is one S3 implementation the tests run against: its stack
// script's env (the same keys for every store) and a root client.
type s3Store struct {
	name string
	env  stack.Env
}

// theMinio is the stack's MinIO, started by TestMain.
func theMinio() s3Store { return s3Store{"minio", s3Env} }

// creds reads the credentials the stack generated.
func (st s3Store) creds(t *testing.T) (string, string) {
	t.Helper()
	read := func(key string) string {
		b, err := os.ReadFile(st.env.Get(t, key))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	return read("DBCANARY_TEST_S3_ACCESS_KEY_FILE"), read("DBCANARY_TEST_S3_SECRET_KEY_FILE")
}

// admin is a root client for setting up buckets and looking behind the canary's back.
func (st s3Store) admin(t *testing.T) *minio.Client {
	t.Helper()
	id, secret := st.creds(t)
	c, err := minio.New(st.env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), &minio.Options{
		Creds: credentials.NewStaticV4(id, secret, ""), Region: st.env.Get(t, "DBCANARY_TEST_S3_REGION"), BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bucket creates a fresh bucket for one test and checks at the end that the
// canary left nothing in it, inside or outside its prefix.
func (st s3Store) bucket(t *testing.T, name string) string {
	t.Helper()
	c := st.admin(t)
	ctx := context.Background()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		if ok, _ := c.BucketExists(ctx, name); !ok {
			t.Fatal(err)
		}
		removeAll(t, c, name)
	}
	t.Cleanup(func() { removeAll(t, c, name); _ = c.RemoveBucket(ctx, name) })
	return name
}

// config returns an s3 section for the store with root credentials.
func (st s3Store) config(t *testing.T, bucket string) *Config {
	c := DefaultConfig
	c.Endpoint = "http://" + st.env.Get(t, "DBCANARY_TEST_S3_ENDPOINT")
	c.Region = st.env.Get(t, "DBCANARY_TEST_S3_REGION")
	c.Addressing = "path"
	c.Bucket = bucket
	c.AccessKeyIDFile = st.env.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE")
	c.SecretAccessKeyFile = st.env.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE")
	return &c
}

// canaryObjects lists the bucket without the heartbeat objects.
func (st s3Store) canaryObjects(t *testing.T, bucket string) []string {
	t.Helper()
	var keys []string
	for _, k := range objects(t, st.admin(t), bucket) {
		if !strings.HasSuffix(k, "/"+heartbeatName) {
			keys = append(keys, k)
		}
	}
	return keys
}

// assertEmpty checks that the bucket holds nothing, waiting (60 s at most)
// for a listing that lags behind deletes (Swift's updates its container
// listing asynchronously; MinIO's listing is current at once).
func (st s3Store) assertEmpty(t *testing.T, bucket string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		keys := objects(t, st.admin(t), bucket)
		if len(keys) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the canary left %d objects in %s bucket %s: %v", len(keys), st.name, bucket, keys)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rootCreds reads the MinIO root credentials the stack generated.
func rootCreds(t *testing.T) (string, string) { t.Helper(); return theMinio().creds(t) }

// admin is a MinIO root client.
func admin(t *testing.T) *minio.Client { t.Helper(); return theMinio().admin(t) }

// bucket creates a fresh MinIO bucket for one test (see s3Store.bucket).
func bucket(t *testing.T, name string) string { t.Helper(); return theMinio().bucket(t, name) }

func objects(t *testing.T, c *minio.Client, bucket string) []string {
	t.Helper()
	var keys []string
	for o := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", bucket, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func removeAll(t *testing.T, c *minio.Client, bucket string) {
	for _, k := range objects(t, c, bucket) {
		_ = c.RemoveObject(context.Background(), bucket, k, minio.RemoveObjectOptions{})
	}
}

// canaryObjects lists a MinIO bucket without the heartbeat objects.
func canaryObjects(t *testing.T, bucket string) []string {
	t.Helper()
	return theMinio().canaryObjects(t, bucket)
}

func assertEmpty(t *testing.T, bucket string) { t.Helper(); theMinio().assertEmpty(t, bucket) }

// minioConfig returns an s3 section for the stack's MinIO with root credentials.
func minioConfig(t *testing.T, bucket string) *Config { return theMinio().config(t, bucket) }

func newProbe(t *testing.T, name string, c *Config) *Probe {
	t.Helper()
	return newProbeAs(t, probes.Target{Name: name, InstanceID: "it-1", Config: c})
}

// newProbeAs builds a probe for a target with its own instance id or Ephemeral flag.
func newProbeAs(t *testing.T, target probes.Target) *Probe {
	t.Helper()
	if errs := target.Config.Validate(); len(errs) != 0 {
		t.Fatalf("config: %v", errs)
	}
	target.Logger = enginetest.Logger()
	closeLedger := enginetest.OpenLedger(t, testLedgers, "s3", &target)
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	ledgerClosers.Store(p, closeLedger)
	return p
}

// ledgerClosers closes each probe's ledger (enginetest.OpenLedger), by probe.
var ledgerClosers sync.Map

// closeProbe stops p as the daemon stops a target: the probe, then its ledger.
func closeProbe(p *Probe) error {
	err := p.Close()
	if c, ok := ledgerClosers.LoadAndDelete(p); ok {
		c.(func())()
	}
	return err
}

func run(t *testing.T, p *Probe, op string, timeout time.Duration) (probes.Outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out probes.Outcome
	out.Reset(time.Now())
	err := p.Run(ctx, op, &out)
	return out, err
}

func mustRun(t *testing.T, p *Probe, op string) probes.Outcome {
	t.Helper()
	out, err := run(t, p, op, 20*time.Second)
	if err != nil {
		t.Fatalf("%s: %v (cause %s)", op, err, probes.CauseOf(err))
	}
	return out
}

func prepare(t *testing.T, p *Probe) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return p.Prepare(ctx)
}

func phase(out probes.Outcome, name string) time.Duration {
	for _, ph := range out.Phases() {
		if ph.Name == name {
			return ph.Duration
		}
	}
	return -1
}

// TestEngineAllSizes runs every default op through a real engine: all four
// sizes put/get/head/delete and list succeed, the get phases and byte
// counters fill, the lifecycle rule is set, and stopping leaves the bucket empty.
func TestEngineAllSizes(t *testing.T) {
	st := theMinio()
	engineAllSizes(t, st, st.bucket(t, "dbcanary-it-engine"))
}

// engineAllSizes is TestEngineAllSizes on one store; the lifecycle rule is
// checked where the store has the API (MinIO).
func engineAllSizes(t *testing.T, st s3Store, b string) {
	c := st.config(t, b)
	h := enginetest.Start(t, fmt.Sprintf(`
global: {instance_id: it-1, timeout: 20s, max_in_flight: 8}
targets:
  - name: %s
    backend: s3
    ops:
      "*": {rate: 1}
      # The ledger's objects outlive the daemon by design (ledger_integration_test.go).
      ledger_write: {rate: 0}
      ledger_check: {rate: 0}
    s3:
      endpoint: %s
      region: %s
      addressing: path
      bucket: %s
      access_key_id_file: %s
      secret_access_key_file: %s
`, st.name, c.Endpoint, c.Region, b, c.AccessKeyIDFile, c.SecretAccessKeyFile))
	var ops []string
	for _, s := range DefaultConfig.Sizes {
		for _, k := range []string{OpPut, OpGet, OpHead, OpDelete} {
			ops = append(ops, OpName(k, s))
		}
	}
	ops = append(ops, OpList)
	enginetest.WaitFor(t, 60*time.Second, "3 successful runs of every op", func() bool {
		for _, op := range ops {
			if h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": op, "result": "ok"}) < 3 {
				return false
			}
		}
		return true
	})
	if st.name == "minio" {
		lc, err := st.admin(t).GetBucketLifecycle(context.Background(), b)
		if err != nil || len(lc.Rules) != 1 || lc.Rules[0].RuleFilter.Prefix != "dbcanary/minio/" || lc.Rules[0].Expiration.Days != 1 ||
			lc.Rules[0].NoncurrentVersionExpiration.NoncurrentDays != 1 { // MinIO drops AbortIncompleteMultipartUpload
			t.Errorf("lifecycle rule: %+v, %v", lc, err)
		}
	}
	// While running, every object is under the instance's prefix and bounded.
	keys := objects(t, st.admin(t), b)
	if len(keys) > 2*len(DefaultConfig.Sizes)*DefaultConfig.MaxObjectsPerSize {
		t.Errorf("%d objects live, more than 2 x sizes x max_objects_per_size", len(keys))
	}
	t.Logf("%d canary objects live while running", len(keys))
	for _, k := range keys {
		if !strings.HasPrefix(k, "dbcanary/"+st.name+"/it-1/") {
			t.Errorf("object %s outside the prefix", k)
		}
	}
	// Stopped, the counters are final: compare them with each other.
	h.Engine.Stop()
	if n := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": st.name}); n != 0 {
		for _, m := range h.Find(t, "dbcanary_op_failures_total", enginetest.L{"target": st.name}) {
			if m.GetCounter().GetValue() > 0 {
				t.Errorf("failures: %v", m.GetLabel())
			}
		}
		t.Fatalf("%g failed ops against a healthy %s", n, st.name)
	}
	for _, s := range DefaultConfig.Sizes {
		get := OpName(OpGet, s)
		for _, ph := range []string{PhaseFirstByte, PhaseLastByte} {
			if n := h.HistogramCount(t, "dbcanary_op_phase_seconds", enginetest.L{"op": get, "phase": ph}); n < 3 {
				t.Errorf("%s phase %s has %d samples", get, ph, n)
			}
		}
		ttfb := h.HistogramSum(t, "dbcanary_op_phase_seconds", enginetest.L{"op": get, "phase": PhaseFirstByte})
		ttlb := h.HistogramSum(t, "dbcanary_op_phase_seconds", enginetest.L{"op": get, "phase": PhaseLastByte})
		if ttlb < ttfb {
			t.Errorf("%s: sum of last_byte %.4fs < first_byte %.4fs", get, ttlb, ttfb)
		}
		got := h.Value(t, "dbcanary_op_bytes_total", enginetest.L{"op": get, "direction": "received"})
		n := h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": get, "result": "ok"})
		if got < float64(n)*float64(s) {
			t.Errorf("%s received %g bytes over %d gets", get, got, n)
		}
		if sent := h.Value(t, "dbcanary_op_bytes_total", enginetest.L{"op": OpName(OpPut, s), "direction": "sent"}); sent < 3*float64(s) {
			t.Errorf("put_%s sent %g bytes", s, sent)
		}
		t.Logf("%-8s gets=%d mean first_byte=%.2fms last_byte=%.2fms", s, n, 1000*ttfb/float64(n), 1000*ttlb/float64(n))
	}
	st.assertEmpty(t, b)
}

// TestMismatchAndNotFound: an object overwritten behind the canary's back is
// caught as mismatch by get and head; one deleted behind its back is not_found.
func TestMismatchAndNotFound(t *testing.T) {
	b := bucket(t, "dbcanary-it-integrity")
	c := minioConfig(t, b)
	c.ListingGrace = 0 // MinIO's listings are strongly consistent: a key neither listed nor found by HEAD is gone at once
	p := newProbe(t, "integrity", c)
	// Keys of other processes, even of this instance id, and keys outside the
	// prefix: Prepare deletes nothing (abandoned runs are the collector's).
	ctx := context.Background()
	others := []string{"dbcanary/integrity/it-1/4KiB/00000000-00000001", "dbcanary/integrity/it-2/4KiB/00000000-00000001", "dbcanary/integrity/it-10", "elsewhere/x"}
	for _, k := range others {
		if _, err := admin(t).PutObject(ctx, b, k, bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(others), p.heartbeat)
	slices.Sort(want)
	if keys := objects(t, admin(t), b); !slices.Equal(keys, want) {
		t.Fatalf("after Prepare: %v, want %v", keys, want)
	}
	for _, k := range others {
		if err := admin(t).RemoveObject(ctx, b, k, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, p, "put_4KiB")
	mustRun(t, p, "get_4KiB")
	keys := canaryObjects(t, b)
	if len(keys) != 1 {
		t.Fatalf("want one object, got %v", keys)
	}
	// Same size, other bytes: only a byte-for-byte compare can tell.
	junk := bytes.Repeat([]byte{'x'}, 4096)
	if _, err := admin(t).PutObject(context.Background(), b, keys[0], bytes.NewReader(junk), int64(len(junk)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, p, "get_4KiB", 10*time.Second)
	if probes.CauseOf(err) != probes.CauseMismatch || !strings.Contains(err.Error(), "first difference at byte 0 of 4096") {
		t.Fatalf("get of an overwritten object: cause %q, %v", probes.CauseOf(err), err)
	}
	t.Logf("overwrite: %v", err)

	mustRun(t, p, "put_128KiB")
	keys = canaryObjects(t, b)
	var k128 string
	for _, k := range keys {
		if strings.Contains(k, "/128KiB/") {
			k128 = k
		}
	}
	if _, err := admin(t).PutObject(context.Background(), b, k128, bytes.NewReader(make([]byte, 128<<10)), 128<<10, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, p, "head_128KiB", 10*time.Second); probes.CauseOf(err) != probes.CauseMismatch {
		t.Fatalf("head of an overwritten object: cause %q, %v", probes.CauseOf(err), err)
	}

	mustRun(t, p, "put_1MiB")
	for _, k := range canaryObjects(t, b) {
		if strings.Contains(k, "/1MiB/") {
			if err := admin(t).RemoveObject(context.Background(), b, k, minio.RemoveObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err = run(t, p, "list", 10*time.Second)
	if probes.CauseOf(err) != probes.CauseNotFound {
		t.Fatalf("list without an object written earlier: cause %q, %v", probes.CauseOf(err), err)
	}
	_, err = run(t, p, "get_1MiB", 10*time.Second)
	if probes.CauseOf(err) != probes.CauseNotFound {
		t.Fatalf("get of a deleted object: cause %q, %v", probes.CauseOf(err), err)
	}
	// The vanished object is forgotten: the next get writes a fresh one and passes.
	mustRun(t, p, "get_1MiB")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, b)
}

// TestWrongSecretIsAuth: a wrong secret key fails Prepare and ops with cause
// auth, and the error does not carry the secret.
func TestWrongSecretIsAuth(t *testing.T) {
	b := bucket(t, "dbcanary-it-auth")
	c := minioConfig(t, b)
	wrong := "wrong-secret-" + fmt.Sprint(time.Now().UnixNano())
	c.SecretAccessKeyFile = filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(c.SecretAccessKeyFile, []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, "auth", c)
	defer p.Close()
	err := prepare(t, p)
	if probes.CauseOf(err) != probes.CauseAuth || strings.Contains(err.Error(), wrong) {
		t.Fatalf("prepare: cause %q, %v", probes.CauseOf(err), err)
	}
	_, err = run(t, p, "put_4KiB", 10*time.Second)
	if probes.CauseOf(err) != probes.CauseAuth || strings.Contains(err.Error(), wrong) {
		t.Fatalf("put: cause %q, %v", probes.CauseOf(err), err)
	}
	t.Logf("wrong secret: %v", err)
}

// leastPrivilege is the policy the README (S3 probe) tells operators to grant, for a
// bucket and the default prefix root dbcanary/.
func leastPrivilege(bucket string) string {
	return strings.NewReplacer("BUCKET", bucket).Replace(`{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::BUCKET"],
     "Condition": {"StringLike": {"s3:prefix": ["dbcanary/*"]}}},
    {"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
     "Resource": ["arn:aws:s3:::BUCKET/dbcanary/*"]},
    {"Effect": "Allow", "Action": ["s3:GetLifecycleConfiguration", "s3:PutLifecycleConfiguration", "s3:ListBucketMultipartUploads"], "Resource": ["arn:aws:s3:::BUCKET"]}
  ]
}`)
}

// restricted returns temporary credentials limited to policy: MinIO's STS
// AssumeRole with an inline session policy, called with the root key. MinIO
// enforces the session policy even for root-derived credentials, so this is
// a real restricted key without an admin client (minio-go has none).
func restricted(t *testing.T, policy string) (keyFile, secretFile, tokenFile string) {
	t.Helper()
	id, secret := rootCreds(t)
	creds, err := credentials.NewSTSAssumeRole("http://"+s3Env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), credentials.STSAssumeRoleOptions{
		AccessKey: id, SecretKey: secret, Policy: policy, Location: "us-east-1", DurationSeconds: 3600,
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := creds.GetWithContext(nil)
	if err != nil {
		t.Fatalf("AssumeRole: %v", err)
	}
	dir := t.TempDir()
	write := func(name, val string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(val), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	return write("key", v.AccessKeyID), write("secret", v.SecretAccessKey), write("token", v.SessionToken)
}

// TestLeastPrivilege: the documented policy is enough for every op, forbids
// anything outside the prefix, and without s3:CreateBucket a missing bucket
// gives an error naming that permission.
func TestLeastPrivilege(t *testing.T) {
	b := bucket(t, "dbcanary-it-least")
	key, secret, token := restricted(t, leastPrivilege(b))
	c := minioConfig(t, b)
	c.AccessKeyIDFile, c.SecretAccessKeyFile, c.SessionTokenFile = key, secret, token
	c.Sizes = []Size{4 * KiB, 8 * MiB}
	p := newProbe(t, "least", c)
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"put_4KiB", "put_4KiB", "get_4KiB", "head_4KiB", "delete_4KiB", "put_8MiB", "get_8MiB", "head_8MiB", "delete_8MiB", "list"} {
		mustRun(t, p, op)
	}
	// The same key may not touch anything outside dbcanary/.
	restrictedClient, err := minio.New(s3Env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), &minio.Options{
		Creds: newCredentials(c), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restrictedClient.PutObject(context.Background(), b, "other/x", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); minio.ToErrorResponse(err).Code != "AccessDenied" {
		t.Fatalf("write outside the prefix: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, b)

	missing := "dbcanary-it-missing"
	_ = admin(t).RemoveBucket(context.Background(), missing)
	key, secret, token = restricted(t, leastPrivilege(missing))
	c = minioConfig(t, missing)
	c.AccessKeyIDFile, c.SecretAccessKeyFile, c.SessionTokenFile = key, secret, token
	p = newProbe(t, "least", c)
	defer p.Close()
	err = prepare(t, p)
	if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), "missing permission s3:CreateBucket on arn:aws:s3:::"+missing) {
		t.Fatalf("missing bucket without s3:CreateBucket: cause %q, %v", probes.CauseOf(err), err)
	}
	t.Logf("missing bucket: %v", err)
	c.CreateBucket = false
	p2 := newProbe(t, "least", c)
	defer p2.Close()
	if err := prepare(t, p2); probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), "create_bucket is false") {
		t.Fatalf("missing bucket with create_bucket false: %v", err)
	}
	if ok, _ := admin(t).BucketExists(context.Background(), missing); ok {
		t.Fatal("the restricted key created a bucket")
	}
}

// TestOutageAndRecovery: stopping MinIO takes the target down with cause
// refused while the engine keeps running; after a restart it comes back. It
// stops a MinIO of its own, never the shared one.
func TestOutageAndRecovery(t *testing.T) {
	m := startPrivateMinio(t)
	b := "dbcanary-it-outage"
	if err := m.client(t).MakeBucket(context.Background(), b, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	h := enginetest.Start(t, fmt.Sprintf(`
global: {instance_id: it-1, timeout: 3s, max_in_flight: 4}
targets:
  - name: outage
    backend: s3
    ops:
      put_4KiB: {rate: 4}
      get_4KiB: {rate: 4}
    s3:
      endpoint: http://%s
      addressing: path
      bucket: %s
      sizes: [4KiB]
      access_key_id_file: %s
      secret_access_key_file: %s
`, m.addr, b, m.keyFile, m.secretFile))
	up := func() float64 { return h.Value(t, "dbcanary_target_up", enginetest.L{"target": "outage"}) }
	okGets := func() uint64 {
		return h.HistogramCount(t, "dbcanary_op_latency_seconds", enginetest.L{"op": "get_4KiB", "result": "ok"})
	}
	enginetest.WaitFor(t, 30*time.Second, "target up with successful gets", func() bool { return up() == 1 && okGets() >= 2 })
	m.stop()
	enginetest.WaitFor(t, 30*time.Second, "target down", func() bool { return up() == 0 })
	if n := h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "outage", "cause": "refused"}); n == 0 {
		t.Errorf("no refused failures while MinIO was stopped")
	}
	before := okGets()
	m.start()
	enginetest.WaitFor(t, 60*time.Second, "target up again", func() bool { return up() == 1 && okGets() >= before+2 })
	h.Engine.Stop()
	if keys := m.keys(t, b); len(keys) != 0 {
		t.Fatalf("the canary left %d objects: %v", len(keys), keys)
	}
}

// TestBandwidthLimitSeparatesFirstAndLastByte: behind a ~1 MB/s bandwidth
// toxic, the 8 MiB object's time to last byte grows by seconds while the
// 4 KiB object's time to first byte stays low.
func TestBandwidthLimitSeparatesFirstAndLastByte(t *testing.T) {
	b := bucket(t, "dbcanary-it-toxic")
	tc := toxiproxy.NewClient(toxiEnv.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	name := "dbcanary_s3_it"
	if old, err := tc.Proxy(name); err == nil {
		_ = old.Delete()
	}
	proxy, err := tc.CreateProxy(name, "127.0.0.1:0", s3Env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Delete()
	if _, port, _ := net.SplitHostPort(proxy.Listen); port == "0" || port == "" {
		t.Fatalf("proxy listens on %q", proxy.Listen)
	}
	c := minioConfig(t, b)
	c.Endpoint = "http://" + proxy.Listen
	c.Sizes = []Size{4 * KiB, 8 * MiB}
	p := newProbe(t, "toxic", c)
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, "put_4KiB")
	mustRun(t, p, "put_8MiB")
	for o := range admin(t).ListObjects(context.Background(), b, minio.ListObjectsOptions{Recursive: true}) {
		if strings.Contains(o.Key, "/8MiB/") && !strings.HasSuffix(o.ETag, "-2") {
			t.Errorf("8 MiB object ETag %q: want a 2-part multipart upload (5 MiB threshold)", o.ETag)
		}
	}
	base8 := phase(mustRun(t, p, "get_8MiB"), PhaseLastByte)
	base4 := phase(mustRun(t, p, "get_4KiB"), PhaseFirstByte)

	if _, err := proxy.AddToxic("bw", "bandwidth", "downstream", 1, toxiproxy.Attributes{"rate": 1024}); err != nil {
		t.Fatal(err)
	}
	out8, err := run(t, p, "get_8MiB", 60*time.Second)
	if err != nil {
		t.Fatalf("get_8MiB behind the toxic: %v", err)
	}
	out4 := mustRun(t, p, "get_4KiB")
	slow8, first8, first4 := phase(out8, PhaseLastByte), phase(out8, PhaseFirstByte), phase(out4, PhaseFirstByte)
	t.Logf("8MiB last_byte %s -> %s (first_byte %s); 4KiB first_byte %s -> %s", base8, slow8, first8, base4, first4)
	if slow8 < 4*time.Second || slow8 < 5*base8 {
		t.Errorf("8 MiB time to last byte %s behind a 1 MB/s limit (was %s): want seconds", slow8, base8)
	}
	if first4 > time.Second || first4 > slow8/8 {
		t.Errorf("4 KiB time to first byte %s behind the limit: want it low (8 MiB last byte took %s)", first4, slow8)
	}
	if err := proxy.RemoveToxic("bw"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, b)
}

// TestBucketDeletedIsRecreated: a bucket deleted behind the canary's back
// gives setup (never not_found) wrapping ErrNamespaceGone; Prepare then recreates it and
// ops pass again without a not_found for the objects that went with it.
func TestBucketDeletedIsRecreated(t *testing.T) {
	b := bucket(t, "dbcanary-it-gone")
	p := newProbe(t, "gone", minioConfig(t, b))
	defer p.Close()
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, "put_4KiB")
	removeAll(t, admin(t), b)
	if err := admin(t).RemoveBucket(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"get_4KiB", "put_4KiB"} {
		_, err := run(t, p, op, 10*time.Second)
		if probes.CauseOf(err) != probes.CauseSetup || !errors.Is(err, probes.ErrNamespaceGone) {
			t.Fatalf("%s in a deleted bucket: cause %q, %v", op, probes.CauseOf(err), err)
		}
	}
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, "get_4KiB")
	mustRun(t, p, "head_4KiB")
	mustRun(t, p, "list")
}
