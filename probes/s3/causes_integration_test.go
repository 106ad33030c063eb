//go:build integration

package s3

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

// TestMissingBucketIsSetup: with create_bucket false, a missing bucket is a
// setup problem naming the bucket and the fix, for Prepare and for every op
// the engine runs; never not_found (which would page as data loss). The same
// for a bucket deleted while the canary runs.
func TestMissingBucketIsSetup(t *testing.T) {
	missing := "dbcanary-it-nobucket"
	_ = admin(t).RemoveBucket(context.Background(), missing)
	c := minioConfig(t, missing)
	c.CreateBucket = false
	p := newProbe(t, "nobucket", c)
	defer p.Close()
	err := prepare(t, p)
	if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), `bucket "`+missing+`" does not exist and create_bucket is false`) ||
		!strings.Contains(err.Error(), "create the bucket, or set create_bucket: true") {
		t.Fatalf("prepare: cause %q, %v", probes.CauseOf(err), err)
	}
	t.Logf("missing bucket: %v", err)

	h := enginetest.Start(t, fmt.Sprintf(`
global: {instance_id: it-1, timeout: 5s}
targets:
  - name: nobucket
    backend: s3
    ops:
      "*": {rate: 2}
    s3:
      endpoint: %s
      addressing: path
      bucket: %s
      create_bucket: false
      sizes: [4KiB]
      access_key_id_file: %s
      secret_access_key_file: %s
`, c.Endpoint, missing, c.AccessKeyIDFile, c.SecretAccessKeyFile))
	failures := func(cause string) float64 {
		return h.Value(t, "dbcanary_op_failures_total", enginetest.L{"target": "nobucket", "cause": cause})
	}
	enginetest.WaitFor(t, 30*time.Second, "10 setup failures", func() bool { return failures("setup") >= 10 })
	h.Engine.Stop()
	for _, cause := range probes.Causes {
		if n := failures(string(cause)); cause != probes.CauseSetup && n > 0 {
			t.Errorf("%g failures with cause %s; want setup only", n, cause)
		}
	}
	if ok, _ := admin(t).BucketExists(context.Background(), missing); ok {
		t.Fatal("a bucket was created with create_bucket false")
	}

	// Deleted while running: setup and a new Prepare, which says the same.
	b := bucket(t, "dbcanary-it-bucketgone")
	defer func() { _ = admin(t).MakeBucket(context.Background(), b, minio.MakeBucketOptions{}) }() // for bucket's cleanup
	c = minioConfig(t, b)
	c.CreateBucket = false
	p = newProbe(t, "bucketgone", c)
	defer p.Close()
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, "put_4KiB")
	removeAll(t, admin(t), b)
	if err := admin(t).RemoveBucket(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"get_4KiB", "head_4KiB", "list", "put_4KiB"} {
		_, err := run(t, p, op, 10*time.Second)
		if probes.CauseOf(err) != probes.CauseSetup || !errors.Is(err, probes.ErrNamespaceGone) {
			t.Errorf("%s with the bucket deleted: cause %q, %v", op, probes.CauseOf(err), err)
		}
	}
	if err := prepare(t, p); probes.CauseOf(err) != probes.CauseSetup {
		t.Errorf("prepare with the bucket deleted: cause %q, %v", probes.CauseOf(err), err)
	}
}

// policyWithout is the least-privilege policy minus some actions.
func policyWithout(bucket string, drop ...string) string {
	objectActions := []string{"s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"}
	var keep []string
	for _, a := range objectActions {
		if !strings.Contains(strings.Join(drop, ","), a) {
			keep = append(keep, `"`+a+`"`)
		}
	}
	stmts := []string{fmt.Sprintf(`{"Effect": "Allow", "Action": [%s], "Resource": ["arn:aws:s3:::%s/dbcanary/*"]}`, strings.Join(keep, ", "), bucket)}
	if !strings.Contains(strings.Join(drop, ","), "s3:ListBucket") {
		stmts = append(stmts, fmt.Sprintf(`{"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::%s"], "Condition": {"StringLike": {"s3:prefix": ["dbcanary/*"]}}}`, bucket))
	}
	return `{"Version": "2012-10-17", "Statement": [` + strings.Join(stmts, ", ") + `]}`
}

// TestMissingPermissionIsSetup: valid credentials lacking a permission give
// cause setup with an error naming the permission, for every operation; never
// auth (reserved for rejected credentials) and never not_found.
func TestMissingPermissionIsSetup(t *testing.T) {
	b := bucket(t, "dbcanary-it-perms")
	for _, tc := range []struct {
		drop string
		ops  []string // run after Prepare; the last must fail
	}{
		{"s3:ListBucket", nil},
		{"s3:PutObject", []string{"put_4KiB"}},
		{"s3:GetObject", []string{"put_4KiB", "get_4KiB"}},
		{"s3:GetObject", []string{"put_4KiB", "head_4KiB"}},
		{"s3:DeleteObject", []string{"put_4KiB", "put_4KiB", "delete_4KiB"}},
	} {
		name := tc.drop
		if len(tc.ops) > 0 {
			name += "/" + tc.ops[len(tc.ops)-1]
		}
		t.Run(name, func(t *testing.T) {
			key, secret, token := restricted(t, policyWithout(b, tc.drop))
			c := minioConfig(t, b)
			c.AccessKeyIDFile, c.SecretAccessKeyFile, c.SessionTokenFile = key, secret, token
			c.Sizes = []Size{4 * KiB}
			p := newProbe(t, "perms", c)
			defer func() { _ = p.Close(); removeAll(t, admin(t), b) }()
			err := prepare(t, p)
			for i, op := range tc.ops {
				if err != nil {
					break
				}
				_, err = run(t, p, op, 10*time.Second)
				if err == nil && i == len(tc.ops)-1 {
					t.Fatalf("%s without %s succeeded", op, tc.drop)
				}
			}
			if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), "missing permission "+tc.drop) {
				t.Fatalf("without %s: cause %q, %v", tc.drop, probes.CauseOf(err), err)
			}
			t.Logf("without %s: %v", tc.drop, err)
		})
	}
}

// TestRejectedCredentialsAreAuth: an unknown access key id and a wrong secret
// are auth for Prepare and for each op, HEAD included, and never name the secret.
func TestRejectedCredentialsAreAuth(t *testing.T) {
	b := bucket(t, "dbcanary-it-rejected")
	good := newProbe(t, "rejected", minioConfig(t, b))
	defer good.Close()
	if err := prepare(t, good); err != nil {
		t.Fatal(err)
	}
	_, secret := rootCreds(t)
	for _, tc := range []struct{ name, key, secret string }{
		{"unknown key id", "NOSUCHKEY" + fmt.Sprint(time.Now().UnixNano()%1e6), secret},
		{"wrong secret", "", "wrong-secret-" + fmt.Sprint(time.Now().UnixNano())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := minioConfig(t, b)
			dir := t.TempDir()
			if tc.key != "" {
				c.AccessKeyIDFile = filepath.Join(dir, "key")
				if err := os.WriteFile(c.AccessKeyIDFile, []byte(tc.key), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c.SecretAccessKeyFile = filepath.Join(dir, "secret")
			if err := os.WriteFile(c.SecretAccessKeyFile, []byte(tc.secret), 0o600); err != nil {
				t.Fatal(err)
			}
			p := newProbe(t, "rejected", c)
			defer p.Close()
			if err := prepare(t, p); probes.CauseOf(err) != probes.CauseAuth {
				t.Errorf("prepare: cause %q, %v", probes.CauseOf(err), err)
			}
			// The good probe's object, read with the bad key: the live set is shared state of
			// one process, so hand the object over through the key.
			mustRun(t, good, "put_4KiB")
			o := good.live.forRead(4*KiB, time.Now())
			good.live.release(o, false)
			p.live.mu.Lock()
			p.live.bySize[4*KiB] = []*object{{key: o.key, seed: o.seed, size: o.size, etag: o.etag, written: o.written}}
			p.live.mu.Unlock()
			for _, op := range []string{"put_4KiB", "get_4KiB", "head_4KiB", "list", "delete_4KiB"} {
				_, err := run(t, p, op, 10*time.Second)
				if probes.CauseOf(err) != probes.CauseAuth || strings.Contains(err.Error(), tc.secret) {
					t.Errorf("%s: cause %q, %v", op, probes.CauseOf(err), err)
				}
			}
		})
	}
}

// TestPhasesCountFromIntendedStart: the get phases the S3 latency alerts use
// count from the op's intended start, so a stall before the send shows in
// them; service time still counts from the send. A setup write of the first
// object (slowed down here by an upstream bandwidth limit) is left out.
func TestPhasesCountFromIntendedStart(t *testing.T) {
	b := bucket(t, "dbcanary-it-phases")
	p := newProbe(t, "phases", minioConfig(t, b))
	defer p.Close()
	if err := prepare(t, p); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, "put_4KiB")
	const stall = 1500 * time.Millisecond
	var out probes.Outcome
	out.Reset(time.Now().Add(-stall)) // due 1.5 s ago: the schedule or the pool was late
	if err := p.Run(context.Background(), "get_4KiB", &out); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	first, last := phase(out, PhaseFirstByte), phase(out, PhaseLastByte)
	service := end.Sub(out.Sent)
	t.Logf("stall %s: first_byte %s last_byte %s service %s", stall, first, last, service)
	if first < stall || last < first || last > end.Sub(out.Intended) {
		t.Errorf("phases first_byte %s last_byte %s after a %s stall: want them from the intended start", first, last, stall)
	}
	if service >= stall {
		t.Errorf("service time %s includes the stall before the send", service)
	}

	// Through a proxy that uploads at 256 KB/s, the 1 MiB object a first get
	// writes takes seconds; the read's phases leave that write out.
	tc := toxiproxy.NewClient(toxiEnv.Get(t, "DBCANARY_TEST_TOXIPROXY_ADDR"))
	name := "dbcanary_s3_phases_it"
	if old, err := tc.Proxy(name); err == nil {
		_ = old.Delete()
	}
	proxy, err := tc.CreateProxy(name, "127.0.0.1:0", s3Env.Get(t, "DBCANARY_TEST_S3_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Delete()
	c := minioConfig(t, b)
	c.Endpoint = "http://" + proxy.Listen
	slow := newProbe(t, "phases-slow", c)
	defer slow.Close()
	if err := prepare(t, slow); err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.AddToxic("up", "bandwidth", "upstream", 1, toxiproxy.Attributes{"rate": 256}); err != nil {
		t.Fatal(err)
	}
	out.Reset(time.Now())
	if err := slow.Run(context.Background(), "get_1MiB", &out); err != nil {
		t.Fatal(err)
	}
	total := time.Since(out.Intended)
	first, last = phase(out, PhaseFirstByte), phase(out, PhaseLastByte)
	t.Logf("get_1MiB with a setup write: op %s, first_byte %s, last_byte %s", total, first, last)
	if total < 2*time.Second || last > total/2 {
		t.Errorf("get_1MiB took %s with a slow setup write, last_byte %s: want the write left out", total, last)
	}
	_ = proxy.RemoveToxic("up")
}
