//go:build integration

package upgrade

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbcanary/dbcanary/test/stack"
)

// ledgerFile is the on-disk ledger as both releases write it (version 1),
// read by the test on its own: the format is what is under test.
type ledgerFile struct {
	Version  int    `json:"version"`
	Target   string `json:"target"`
	Backend  string `json:"backend"`
	Instance string `json:"instance"`
	Entries  []struct {
		Key     string        `json:"key"`
		Acked   time.Time     `json:"acked"`
		Checked time.Duration `json:"checked"`
	} `json:"entries"`
}

// checked maps each entry's key to the largest age it was read back intact at.
func (f ledgerFile) checked() map[string]time.Duration {
	m := make(map[string]time.Duration, len(f.Entries))
	for _, e := range f.Entries {
		m[e.Key] = e.Checked
	}
	return m
}

// stateFiles reads the state directory: every ledger file by name. A file of
// another kind fails the test (a release that keeps more state needs its
// check here); a temporary file a kill -9 left behind mid-save is listed.
func stateFiles(t *testing.T, dir string) (ledgers map[string]ledgerFile, temporary []string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ledgers = map[string]ledgerFile{}
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.Contains(name, ".json.tmp"):
			temporary = append(temporary, name)
		case strings.HasPrefix(name, "ledger-") && strings.HasSuffix(name, ".json"):
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			var f ledgerFile
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatalf("state file %s: %v", name, err)
			}
			ledgers[name] = f
		default:
			t.Fatalf("state file %s: not a ledger file; the upgrade test does not know what reads it (add its check)", name)
		}
	}
	return ledgers, temporary
}

// scrape reads a daemon's /metrics.
func scrape(t *testing.T, d *stack.Daemon) map[string]*dto.MetricFamily {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + d.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sum adds the values of a counter or gauge family's series whose labels
// include match.
func sum(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	var v float64
	for _, m := range fams[name].GetMetric() {
		ok := true
		for k, want := range match {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && (l.GetValue() == want || want == "*") {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return v
}

// losses are what pages as DbcanaryDurabilityLoss or a data-integrity
// failure: ledger checks missing or corrupted, and ledger_check failures of
// cause not_found or mismatch, per target.
func losses(fams map[string]*dto.MetricFamily, target string) float64 {
	t := map[string]string{"target": target}
	lost := sum(fams, "dbcanary_ledger_checks_total", with(t, "result", "missing")) +
		sum(fams, "dbcanary_ledger_checks_total", with(t, "result", "corrupted"))
	for _, cause := range []string{"not_found", "mismatch"} {
		lost += sum(fams, "dbcanary_op_failures_total", with(with(t, "op", "ledger_check"), "cause", cause))
	}
	return lost
}

// with is m and one more label.
func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// logLines parses a daemon's JSON log (--log.format json).
func logLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// str is a log line's field as text.
func str(m map[string]any, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprint(v)
	}
	return ""
}
