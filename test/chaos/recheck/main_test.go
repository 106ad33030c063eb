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
