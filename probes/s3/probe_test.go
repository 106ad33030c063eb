package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

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
	if p.Prefix() != "dbcanary/t/i-1/" || p.base != "dbcanary/t/" {
		t.Fatalf("prefix %q base %q", p.Prefix(), p.base)
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
		{minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "InvalidAccessKeyId", StatusCode: 403}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "SignatureDoesNotMatch", StatusCode: 403}, probes.CauseAuth, false},
		{minio.ErrorResponse{Code: "NoSuchKey", StatusCode: 404}, probes.CauseNotFound, false},
		{minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, probes.CauseNotFound, true},
		{minio.ErrorResponse{Code: "InternalError", StatusCode: 500}, probes.CauseServer, false},
		{minio.ErrorResponse{Code: "SlowDown", StatusCode: 503}, probes.CauseServer, false},
		{fmt.Errorf("wrapped: %w", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}), probes.CauseAuth, false},
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
