package main

import (
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/chaos/history"
)

// recheck reads a recorded run's directory and returns the checker's
// verdict: 0 for a run that passes, 1 for one that fails, an error naming
// the directory when it holds no samples.
func TestRun(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 33, 0, 0, time.UTC)
	record := func(t *testing.T, pageAfter time.Duration) string {
		dir := t.TempDir()
		w, err := history.NewWriter(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			file string
			v    any
		}{
			{history.FileNemesis, history.Event{Seq: 1, Kind: "s3-stopped", Target: "s3", Phase: history.PhaseInject, At: t0.Add(5 * time.Minute), Pages: []string{"DbcanaryTargetDown"}, Budget: history.Duration(4*time.Minute + 30*time.Second)}},
			{history.FileNemesis, history.Event{Seq: 1, Kind: "s3-stopped", Target: "s3", Phase: history.PhaseRevert, At: t0.Add(11 * time.Minute)}},
			{history.FileNotifications, history.Note{At: t0.Add(5*time.Minute + pageAfter), Receiver: history.ReceiverPager, Status: "firing", GroupKey: "k",
				GroupLabels: map[string]string{"alertname": "DbcanaryTargetDown", "target": "s3"}}},
		} {
			if err := w.Append(v.file, v.v); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 80 {
			if err := w.Append(history.FileSamples, history.Sample{At: t0.Add(time.Duration(i) * 15 * time.Second), Start: 1, RSS: 40 << 20, Goroutines: 80, OpenFDs: 25, Series: 1400}); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	if code, err := run(record(t, 3*time.Minute), "", "mq-lossy", "1"); err != nil || code != 0 {
		t.Errorf("a page in budget: code %d, err %v; want 0", code, err)
	}
	if code, err := run(record(t, 5*time.Minute), "", "mq-lossy", "1"); err != nil || code != 1 {
		t.Errorf("a late page: code %d, err %v; want 1", code, err)
	}
	if _, err := run(t.TempDir(), "", "mq-lossy", "1"); err == nil {
		t.Error("a directory without samples: no error")
	}
}

// firingSince finds when an alert began firing from its ALERTS samples: the
// start of the unbroken run that reaches the notification.
func TestFiringSince(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	var ts []time.Time
	for _, m := range []int{0, 1, 2, 10, 11, 12, 13} { // two runs: 18:00-18:01, 18:05-18:06:30 (15 s steps)
		ts = append(ts, t0.Add(time.Duration(m)*alertStep))
	}
	if ts[3] != t0.Add(150*time.Second) {
		t.Fatalf("alertStep changed: %v", ts[3])
	}
	gap := 2 * alertStep
	for _, c := range []struct {
		at   time.Time
		want time.Time
	}{
		{t0.Add(200 * time.Second), t0.Add(150 * time.Second)}, // the second run
		{t0.Add(20 * time.Second), t0},                         // the first
		{t0.Add(100 * time.Second), time.Time{}},               // between them: not firing
		{t0.Add(-time.Minute), time.Time{}},                    // before any
	} {
		if got := firingSince(ts, c.at, gap); !got.Equal(c.want) {
			t.Errorf("firingSince(at %s) = %s, want %s", c.at.Format("15:04:05"), got.Format("15:04:05"), c.want.Format("15:04:05"))
		}
	}
	if got, want := alertsQuery(map[string]string{"target": "cas", "alertname": "DbcanaryLatencyAboveBaseline"}), `ALERTS{alertstate="firing",alertname="DbcanaryLatencyAboveBaseline",target="cas"}`; got != want {
		t.Errorf("alertsQuery = %s, want %s", got, want)
	}
}
