package history

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// slowS3 answers SlowDown (Swift's ratelimit middleware through s3api, as
// after the daemon deleted its objects in the 2-hour run of 6 Dec 14:00)
// to the first busy requests, then lists two objects.
func slowS3(t *testing.T, busy int64) (*minio.Client, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= busy {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>`+
			`<Contents><Key>a</Key><LastModified>2026-12-06T15:00:00.000Z</LastModified><ETag>"x"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>`+
			`<Contents><Key>b</Key><LastModified>2026-12-06T15:30:00.000Z</LastModified><ETag>"y"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>`)
	}))
	t.Cleanup(srv.Close)
	c, err := minio.New(strings.TrimPrefix(srv.URL, "http://"), &minio.Options{Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
		Creds: credentials.NewStaticV4("k", "s", ""), MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

// A store that throttles the listing for a while is listed once it stops;
// one that throttles past the patience, or fails otherwise, is a problem.
func TestListS3SlowDown(t *testing.T) {
	now := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	c, n := slowS3(t, 3)
	l := ListS3(context.Background(), c, Leftover{Store: "swift"}, "bkt", now, 5*time.Second, 10*time.Millisecond)
	if l.Problem != "" || l.Items != 2 || time.Duration(l.Oldest) != time.Hour {
		t.Errorf("after 3 SlowDown replies: %+v (%d requests)", l, n.Load())
	}
	if !strings.Contains(l.Detail, "3 SlowDown") {
		t.Errorf("detail %q does not say the store throttled the listing", l.Detail)
	}
	c, _ = slowS3(t, 1<<30)
	l = ListS3(context.Background(), c, Leftover{Store: "swift"}, "bkt", now, 100*time.Millisecond, 10*time.Millisecond)
	if !strings.Contains(l.Problem, "Please reduce your request rate") || l.Items != 0 {
		t.Errorf("throttled past the patience: %+v", l)
	}
}
