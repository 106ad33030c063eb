package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Shard makes a run one driver of several (Mongoose's distributed mode):
// driver Index of Count, every driver starting its first stage at StartAt.
// Each driver works in a namespace of its own (its instance id carries
// "bench-s<Index>" and a random suffix: its own queue, object prefix,
// Cassandra rows, documents), so the drivers never touch each other's keys;
// `dbcanary bench merge` adds their reports into one.
type Shard struct {
	Index   int       `json:"index"`
	Count   int       `json:"count"`
	StartAt time.Time `json:"start_at"`
}

// stageGap separates the stages of the common schedule: a stage's last ops
// and its drain end within it before the next stage starts on every driver.
// warmGap does the same between a warm-up and the measured part.
const (
	stageGap = 2 * time.Second
	warmGap  = time.Second
)

// maxDrivers bounds --shard's N.
const maxDrivers = 1000

// ParseShard reads --shard "i/N" (0 <= i < N).
func ParseShard(s string) (index, count int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("%q: want INDEX/COUNT, e.g. 0/4 (the first of four drivers)", s)
	case n < 1 || n > maxDrivers:
		return 0, 0, fmt.Errorf("%q: the driver count must be 1..%d", s, maxDrivers)
	case i < 0 || i >= n:
		return 0, 0, fmt.Errorf("%q: the index must be 0..%d (drivers count from 0)", s, n-1)
	}
	return i, n, nil
}

// kind is the instance id's kind: each driver's namespace names its shard.
func (s *Shard) kind() string {
	if s == nil {
		return "bench"
	}
	return "bench-s" + strconv.Itoa(s.Index)
}

// String is "i/N".
func (s *Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Describe is the report's line on the driver.
func (s *Shard) Describe() string {
	d := fmt.Sprintf("Driver %d of %d (--shard %s)", s.Index, s.Count, s)
	if !s.StartAt.IsZero() {
		d += ", common start " + s.StartAt.UTC().Format(time.RFC3339Nano)
	}
	return d + ": merge the drivers' JSON reports with `dbcanary bench merge`."
}

// nextPlan is when the stage after st starts on every driver: its planned
// start plus its warm-up, its duration and stageGap. A stage that ends at an
// op count alone ends at a different time on each driver: the stages after
// it start when it ends (zero: no common start).
func nextPlan(plan time.Time, st stageSpec) time.Time {
	if plan.IsZero() || st.Duration <= 0 {
		return time.Time{}
	}
	return measureAt(plan, st).Add(st.Duration + stageGap)
}

// measureAt is when the measured part of a stage planned at plan starts on
// every driver: after its warm-up and warmGap (zero: no common schedule).
func measureAt(plan time.Time, st stageSpec) time.Time {
	if plan.IsZero() || st.Warmup <= 0 {
		return plan
	}
	return plan.Add(st.Warmup + warmGap)
}

// waitUntil waits for t, showing it, and returns how late it is when t had
// already passed.
func waitUntil(ctx context.Context, t time.Time, label string, show func(string, bool)) (late time.Duration, err error) {
	d := time.Until(t)
	if d <= 0 {
		return -d, nil
	}
	show(fmt.Sprintf("%s  waiting for the drivers' common start %s (%s)", label, t.UTC().Format(time.RFC3339), d.Round(time.Second)), true)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-timer.C:
		return 0, nil
	}
}
