package history

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The 2-hour run of 6 Dec 2026 (SEED=1): S3 latency x4 held 9m18s; its
// LatencyAboveBaseline page resolved 7m06s after the revert (the 5-minute
// window, then the group's next 5-minute tick). A resolution is not a page;
// the run's grace must cover the rules' window and group_interval.
func TestRunOptionsResolution(t *testing.T) {
	h := History{
		Start: t0, End: at("30m"),
		Events: []Event{
			{Seq: 1, Kind: "s3-latency-x4", Target: "s3", Phase: PhaseInject, At: at("1m"), Pages: []string{"DbcanaryLatencyAboveBaseline"}, Budget: Duration(8*time.Minute + 15*time.Second)},
			{Seq: 1, Kind: "s3-latency-x4", Target: "s3", Phase: PhaseRevert, At: at("10m18s")},
		},
		Notes: []Note{
			page(at("7m24s"), "firing", "DbcanaryLatencyAboveBaseline", "s3"),
			page(at("17m24s"), "resolved", "DbcanaryLatencyAboveBaseline", "s3"), // 7m06s after the revert
		},
		Samples: flat(40, 30*time.Second, 1),
	}
	r := Check(h, RunOptions(30*time.Minute))
	if r.Failed() {
		t.Errorf("a resolution 7m06s after the revert failed the run:\n%s", r.Table(t0))
	}
	// A resolution past the window and a group tick is outside.
	h.Notes[1].At = h.Events[1].At.Add(RuleWindow + 2*ScrapeEvery + GroupInterval + time.Second)
	if r := Check(h, RunOptions(30*time.Minute)); len(r.Outside) != 1 {
		t.Errorf("want the late resolution outside the grace:\n%s", r.Table(t0))
	}
}

// The shipped routes' group_interval is the one the grace is derived from.
func TestRunOptionsGroupInterval(t *testing.T) {
	b, err := os.ReadFile("../../../alerts/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(b), "group_interval:")
	if n == 0 || strings.Count(string(b), "group_interval: "+strings.TrimSuffix(GroupInterval.String(), "0s")) != n {
		t.Errorf("alerts/alertmanager.yml has a group_interval other than %s (history.GroupInterval): update the run's graces", GroupInterval)
	}
}
