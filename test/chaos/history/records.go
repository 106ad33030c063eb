package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The files of a recorded run, in its directory: one JSON object a line.
const (
	FileNemesis       = "nemesis.jsonl"
	FileNotifications = "notifications.jsonl"
	FileSamples       = "samples.jsonl"
	FileLeftovers     = "leftovers.jsonl"
)

// Phases of a nemesis event.
const (
	PhaseInject = "inject"
	PhaseRevert = "revert"
)

// Event is one line of the nemesis log: a fault injected or reverted.
type Event struct {
	Seq    int       `json:"seq"`
	Kind   string    `json:"kind"`
	Target string    `json:"target,omitempty"`
	Phase  string    `json:"phase"`
	At     time.Time `json:"at"`
	Pages  []string  `json:"pages,omitempty"`
	Budget Duration  `json:"budget,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Error  string    `json:"error,omitempty"` // the injection or revert failed
}

// Note is one Alertmanager notification as the webhook received it.
type Note struct {
	At          time.Time         `json:"at"`
	Receiver    string            `json:"receiver"`
	Status      string            `json:"status"`
	GroupKey    string            `json:"group_key"`
	GroupLabels map[string]string `json:"group_labels"`
	Alerts      []string          `json:"alerts,omitempty"` // their names and labels, for the reader
	// Since is when the newest firing alert of a firing notification began
	// firing (Alertmanager's startsAt, Prometheus's FiredAt): a fault owns
	// the notification only if it was injected before that. Zero in runs
	// recorded before 6 Dec 2026 19:00 and in resolved notifications.
	Since time.Time `json:"since,omitzero"`
}

// Sample is one scrape of dbcanary's own metrics.
type Sample struct {
	At time.Time `json:"at"`
	// Start is the process's start time (process_start_time_seconds): a
	// new value is a restarted dbcanary.
	Start      float64 `json:"start"`
	RSS        float64 `json:"rss_bytes"`
	Goroutines float64 `json:"goroutines"`
	OpenFDs    float64 `json:"open_fds"`
	Series     float64 `json:"series"`
	// FirstUse are the series of Series a failure creates on first use
	// (ReadScrape), FirstUseMax the most the documented layout allows for
	// the ops scraped; both 0 in runs recorded before 6 Dec 2026 13:00.
	FirstUse    float64 `json:"first_use_series,omitempty"`
	FirstUseMax float64 `json:"first_use_max,omitempty"`
	// LedgerLost counts ledger checks that found an acknowledged write
	// missing or corrupted (dbcanary_ledger_checks_total), by target.
	LedgerLost map[string]float64 `json:"ledger_lost,omitempty"`
	// Load is the machine's 1-minute load average when sampled: latency
	// pages on a machine busier than its cores are the machine's.
	Load float64 `json:"load1,omitempty"`
}

// Leftover is what a store still holds of the canary after the run.
type Leftover struct {
	Store  string   `json:"store"`
	Items  int      `json:"items"`
	Oldest Duration `json:"oldest"`  // age of the oldest item at the end
	Allow  Duration `json:"allowed"` // the oldest an item may be (abandoned_after, a TTL)
	// MaxItems, when set, is the most items the store may hold (queues
	// of one instance id).
	MaxItems int    `json:"max_items,omitempty"`
	Detail   string `json:"detail,omitempty"`
	// Problem fails the row: the store could not be listed, or an item
	// breaks its bound in a way Items and Oldest do not show.
	Problem string `json:"problem,omitempty"`
}

// Duration is a time.Duration written as "1m30s" in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// History is everything a run recorded.
type History struct {
	Start, End time.Time
	Events     []Event
	Notes      []Note
	Samples    []Sample
	Leftovers  []Leftover
}

// Writer appends records to a run's files.
type Writer struct{ dir string }

// NewWriter records into dir (created).
func NewWriter(dir string) (*Writer, error) {
	return &Writer{dir: dir}, os.MkdirAll(dir, 0o755)
}

// Append writes v as one line of file.
func (w *Writer) Append(file string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(w.dir, file), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return errors.Join(err, f.Close())
}

// Load reads a recorded run from dir; start and end bound the run.
func Load(dir string, start, end time.Time) (History, error) {
	h := History{Start: start, End: end}
	for file, dst := range map[string]any{FileNemesis: &h.Events, FileNotifications: &h.Notes, FileSamples: &h.Samples, FileLeftovers: &h.Leftovers} {
		f, err := os.Open(filepath.Join(dir, file))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return h, err
		}
		err = readLines(f, dst)
		f.Close()
		if err != nil {
			return h, fmt.Errorf("%s: %w", file, err)
		}
	}
	return h, nil
}

func readLines(r io.Reader, dst any) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var err error
		switch d := dst.(type) {
		case *[]Event:
			err = appendJSON(sc.Bytes(), d)
		case *[]Note:
			err = appendJSON(sc.Bytes(), d)
		case *[]Sample:
			err = appendJSON(sc.Bytes(), d)
		case *[]Leftover:
			err = appendJSON(sc.Bytes(), d)
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}

func appendJSON[T any](b []byte, dst *[]T) error {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*dst = append(*dst, v)
	return nil
}
