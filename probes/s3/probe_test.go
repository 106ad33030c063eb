package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/probes"
)

func testProbe(t *testing.T) *Probe {
	t.Helper()
	c := DefaultConfig
	c.Endpoint = "http://127.0.0.1:1"
	c.AccessKeyIDEnv, c.SecretAccessKeyEnv = "HOME", "HOME"
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	p, err := New(probes.Target{Name: "t", InstanceID: "i-1", Config: &c})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewDoesNoIOAndScopesThePrefix(t *testing.T) {
	p := testProbe(t)
	if !isRun(p.run) || p.Prefix() != "dbcanary/t/i-1/"+p.run+"/" || p.base != "dbcanary/t/" || p.heartbeat != p.Prefix()+".heartbeat" {
		t.Fatalf("prefix %q base %q heartbeat %q", p.Prefix(), p.base, p.heartbeat)
	}
	if other := testProbe(t); other.Prefix() == p.Prefix() {
		t.Fatal("two processes with the same instance id share a prefix")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close without prepare: %v", err)
	}
	if err := p.Run(context.Background(), "get_3KiB", &probes.Outcome{}); err == nil {
		t.Fatal("unknown op accepted")
	}
}

func TestClassify(t *testing.T) {
	p := testProbe(t)
	for _, tc := range []struct {
		err  error
		want probes.Cause
		gone bool
	}{
		{minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}, probes.CauseSetup, false},
		{minio.ErrorResponse{Code: "AllAccessDisabled", StatusCode: 403}, probes.CauseSetup, false},
		{minio.ErrorResponse{Code: "InvalidAccessKeyId", StatusCode: 403}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "SignatureDoesNotMatch", StatusCode: 403}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "ExpiredToken", StatusCode: 400}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "InvalidToken", StatusCode: 400}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "RequestTimeTooSkewed", StatusCode: 403}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "403 Forbidden", StatusCode: 403}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "NoSuchKey", StatusCode: 404}, probes.CauseNotFound, false},
		{minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, probes.CauseSetup, true},
		{minio.ErrorResponse{Code: "InternalError", StatusCode: 500}, probes.CauseServer, false},
		{minio.ErrorResponse{Code: "SlowDown", StatusCode: 503}, probes.CauseServer, false},
		{fmt.Errorf("wrapped: %w", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}), probes.CauseSetup, false},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, probes.CauseRefused, false},
		{context.DeadlineExceeded, probes.CauseTimeout, false},
		{errors.New("odd"), probes.CauseOther, false},
	} {
		err := p.classify("get", "dbcanary/t/i-1/4KiB/x-1", tc.err)
		if probes.CauseOf(err) != tc.want || errors.Is(err, probes.ErrNamespaceGone) != tc.gone {
			t.Errorf("%v: cause %s gone %v; want %s %v", tc.err, probes.CauseOf(err), errors.Is(err, probes.ErrNamespaceGone), tc.want, tc.gone)
		}
		if !strings.Contains(err.Error(), "bucket dbcanary") {
			t.Errorf("error does not name the bucket: %v", err)
		}
	}
}

// TestAccessDeniedNamesThePermission: each operation's AccessDenied names the
// IAM action and the resource to grant.
func TestAccessDeniedNamesThePermission(t *testing.T) {
	p := testProbe(t)
	denied := minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}
	key := "dbcanary/t/i-1/0123456789abcdef/4KiB/00000001"
	for what, want := range map[string]string{
		"put":                      "missing permission s3:PutObject on arn:aws:s3:::dbcanary/" + key,
		"put (heartbeat)":          "missing permission s3:PutObject on arn:aws:s3:::dbcanary/" + key,
		"get (after 1 of 2 bytes)": "missing permission s3:GetObject on arn:aws:s3:::dbcanary/" + key,
		"head":                     "missing permission s3:GetObject on arn:aws:s3:::dbcanary/" + key,
		"delete":                   "missing permission s3:DeleteObject on arn:aws:s3:::dbcanary/" + key,
		"list":                     "missing permission s3:ListBucket on arn:aws:s3:::dbcanary ",
	} {
		err := p.classify(what, key, denied)
		if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error()+" ", want) {
			t.Errorf("%s: cause %s, %v; want %q", what, probes.CauseOf(err), err, want)
		}
	}
}

// TestPhaseOrigin: phases count from the intended start, minus a setup write,
// never after the send.
func TestPhaseOrigin(t *testing.T) {
	sent := time.Now()
	intended := sent.Add(-3 * time.Second)
	var out probes.Outcome
	out.Reset(intended)
	if got := phaseOrigin(&out, 0, sent); !got.Equal(intended) {
		t.Errorf("origin %v, want the intended start", sent.Sub(got))
	}
	if got := phaseOrigin(&out, time.Second, sent); !got.Equal(intended.Add(time.Second)) {
		t.Errorf("origin with a 1 s setup write: %v before the send, want 2s", sent.Sub(got))
	}
	if got := phaseOrigin(&out, 5*time.Second, sent); !got.Equal(sent) {
		t.Errorf("origin after the send: %v", got)
	}
	out.Reset(time.Time{})
	if got := phaseOrigin(&out, 0, sent); !got.Equal(sent) {
		t.Errorf("no intended start: origin %v", got)
	}
}

// TestStoreReasonInTheError: where the store says why it refuses (501, 503
// SlowDown, 507 or a quota), the cause and the message say it too.
func TestStoreReasonInTheError(t *testing.T) {
	p := testProbe(t)
	for _, tc := range []struct {
		err  minio.ErrorResponse
		want probes.Cause
		text string
	}{
		{minio.ErrorResponse{Code: "NotImplemented", StatusCode: 501, Message: "Transfering payloads in multiple chunks using aws-chunked is not supported."},
			probes.CauseSetup, "does not implement a feature this request uses (streaming (aws-chunked) uploads"},
		{minio.ErrorResponse{Code: "NotImplemented", StatusCode: 501, Message: "A header you provided implies functionality that is not implemented."},
			probes.CauseSetup, `(get: "A header you provided implies functionality that is not implemented.")`},
		{minio.ErrorResponse{StatusCode: 501}, probes.CauseSetup, "a setup problem, not an outage"},
		{minio.ErrorResponse{Code: "SlowDown", StatusCode: 503, Message: "Please reduce your request rate."},
			probes.CauseServer, "SlowDown: the store asks clients to reduce their request rate"},
		{minio.ErrorResponse{Code: "SlowDownWrite", StatusCode: 503}, probes.CauseServer, "SlowDownWrite: the store asks clients to reduce their request rate"},
		{minio.ErrorResponse{Code: "XMinioStorageFull", StatusCode: 507, Message: "Storage backend has reached its minimum free drive threshold."},
			probes.CauseServer, "storage full (XMinioStorageFull, HTTP 507)"},
		{minio.ErrorResponse{StatusCode: 507}, probes.CauseServer, "storage full"},
		{minio.ErrorResponse{Code: "XMinioAdminBucketQuotaExceeded", StatusCode: 400, Message: "Bucket quota exceeded"},
			probes.CauseServer, "storage full (XMinioAdminBucketQuotaExceeded, HTTP 400)"},
		{minio.ErrorResponse{Code: "EntityTooLarge", StatusCode: 400, Message: "Your proposed upload exceeds the maximum allowed object size."},
			probes.CauseServer, "storage full (EntityTooLarge"},
		{minio.ErrorResponse{Code: "ServiceUnavailable", StatusCode: 503, Message: "Please reduce your request rate."},
			probes.CauseServer, "the store is unavailable (HTTP 503 ServiceUnavailable): a server behind the endpoint is down or overloaded: Please reduce your request rate."},
	} {
		err := p.classify("get", "dbcanary/t/i-1/4KiB/x-1", tc.err)
		if probes.CauseOf(err) != tc.want || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "bucket dbcanary") {
			t.Errorf("%+v: cause %s, %q; want %s and %q", tc.err, probes.CauseOf(err), err, tc.want, tc.text)
		}
	}
}
