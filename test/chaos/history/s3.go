package history

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/minio/minio-go/v7"
)

// ListS3 fills l with what bucket holds: the items and the age of the oldest
// at now. A store that throttles (503 SlowDown) is asked again, waiting
// firstWait, then twice as long each time (at most 15 s), for up to
// patience: Swift's ratelimit middleware answers SlowDown for a while after a
// burst of deletes, such as the daemon removing its objects as it stops
// (the 2-hour run of 6 Dec 14:00 failed its Swift row so, listed 2 s after
// the stop, once minio-go's own retries were spent). Any other error, or
// throttling past patience, is l's Problem.
func ListS3(ctx context.Context, c *minio.Client, l Leftover, bucket string, now time.Time, patience, firstWait time.Duration) Leftover {
	deadline, wait := time.Now().Add(patience), firstWait
	for slow := 0; ; slow++ {
		items, oldest, err := listS3(ctx, c, bucket, now)
		if err == nil {
			l.Items, l.Oldest = items, oldest
			if slow > 0 {
				l.Detail = fmt.Sprintf("listed after %d SlowDown replies", slow)
			}
			return l
		}
		if !throttled(err) || time.Now().Add(wait).After(deadline) {
			l.Problem = err.Error()
			if slow > 0 {
				l.Problem = fmt.Sprintf("%s (still, after %d SlowDown replies over %s)", err, slow, patience)
			}
			return l
		}
		select {
		case <-ctx.Done():
			l.Problem = ctx.Err().Error()
			return l
		case <-time.After(wait):
		}
		wait = min(2*wait, 15*time.Second)
	}
}

func listS3(ctx context.Context, c *minio.Client, bucket string, now time.Time) (int, Duration, error) {
	var items int
	var oldest Duration
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return 0, 0, o.Err
		}
		items++
		oldest = max(oldest, Duration(now.Sub(o.LastModified)))
	}
	return items, oldest, nil
}

// throttled: the store asks the client to slow down.
func throttled(err error) bool {
	r := minio.ToErrorResponse(err)
	return slices.Contains([]string{"SlowDown", "SlowDownRead", "SlowDownWrite"}, r.Code) || r.StatusCode == http.StatusServiceUnavailable
}
