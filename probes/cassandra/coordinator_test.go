package cassandra

import (
	"context"
	"errors"
	"fmt"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

func TestNameCoordinators(t *testing.T) {
	base := probes.Fail(probes.CauseTimeout, fmt.Errorf("cassandra 10.0.0.1: insert: %w", &gocql.RequestErrWriteTimeout{}))
	ctx, c := probes.WithNodeTrail(context.Background())
	// The trail records each attempt's node once, in order, at most probes.MaxTrailNodes.
	for _, n := range []string{"10.0.0.12:9042", "10.0.0.12:9042", "10.0.0.13:9042", "10.0.0.11:9042", "10.0.0.14:9042"} {
		c.Add(n)
	}
	coordObserver{}.ObserveQuery(context.Background(), gocql.ObservedQuery{}) // no trail, no host: ignored
	coordObserver{}.ObserveQuery(ctx, gocql.ObservedQuery{})                  // no host: ignored
	if got := c.List(); fmt.Sprint(got) != "[10.0.0.12:9042 10.0.0.13:9042 10.0.0.11:9042]" {
		t.Errorf("recorded %v", got)
	}

	err := nameCoordinators(base, []string{"10.0.0.12:9042"}, 3)
	if want := "cassandra 10.0.0.1: insert: " + (&gocql.RequestErrWriteTimeout{}).Error() + " (coordinator 10.0.0.12:9042)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if probes.CauseOf(err) != probes.CauseTimeout {
		t.Errorf("cause %s, want timeout", probes.CauseOf(err))
	}
	var wt *gocql.RequestErrWriteTimeout
	if !errors.As(err, &wt) {
		t.Error("the driver's error is no longer in the chain")
	}
	if err := nameCoordinators(base, []string{"a:1", "b:1"}, 3); err.Error() != base.Error()+" (coordinators a:1, then b:1)" {
		t.Errorf("two coordinators: %q", err)
	}
	// One node in the ring, or no attempt reached a node: unchanged.
	if err := nameCoordinators(base, []string{"10.0.0.1:9042"}, 1); err != base {
		t.Errorf("single node: %q", err)
	}
	if err := nameCoordinators(base, nil, 3); err != base {
		t.Errorf("no attempt: %q", err)
	}
	if nameCoordinators(nil, []string{"a:1"}, 3) != nil {
		t.Error("a success became an error")
	}
}
