package generate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/config"
)

// committedRules reads the shipped rule file.
func committedRules(t *testing.T) RuleFile {
	t.Helper()
	var rf RuleFile
	if err := yaml.Unmarshal(readFile(t, filepath.Join(repoRoot(), "alerts", "dbcanary-rules.yml")), &rf); err != nil {
		t.Fatal(err)
	}
	return rf
}

var (
	latencyBound = regexp.MustCompile(`^\S+\{backend="([a-z0-9_]+)",op="([A-Za-z0-9_]+)"[^}]*\} > ([0-9.]+) and`)
	rangeSel     = regexp.MustCompile(`\[([0-9]+[smhdwy])\]`)
	leExact      = regexp.MustCompile(`le="([^"]*)"`)
)

// TestNoUnreachableLatencyRule: at the shipped defaults (every op's timeout
// is the config's default global.timeout), every shipped latency rule's
// threshold is below its op's timeout, so each can fire; the thresholds at or
// above it (OpenSearch bulk, S3 get_8MiB last byte) have no rule and are
// listed in alerts/thresholds.md with the reason.
func TestNoUnreachableLatencyRule(t *testing.T) {
	timeout := config.DefaultGlobal.Timeout
	rules := 0
	for _, g := range committedRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != AlertLatencyAboveBaseline {
				continue
			}
			m := latencyBound.FindStringSubmatch(r.Expr)
			if m == nil {
				t.Fatalf("latency rule without a recognisable threshold: %s", r.Expr)
			}
			bound, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				t.Fatal(err)
			}
			rules++
			if bound >= timeout.Seconds() {
				t.Errorf("%s/%s %s: threshold %gs is at or above the default op timeout %s: the rule can never fire", m[1], m[2], r.Labels["severity"], bound, timeout)
			}
		}
	}
	if rules == 0 {
		t.Fatal("no latency rule in the shipped file")
	}
	b := shippedBaseline(t)
	skipped, err := SkippedThresholds(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range skipped {
		names = append(names, s.Backend+"/"+s.Op+"/"+s.Phase+"/"+s.Severity)
	}
	want := []string{"opensearch/bulk//warning", "opensearch/bulk//critical", "s3/get_8MiB/last_byte/warning", "s3/get_8MiB/last_byte/critical"}
	if !slices.Equal(names, want) {
		t.Errorf("skipped thresholds %v, want %v", names, want)
	}
	table := string(readFile(t, filepath.Join(repoRoot(), "alerts", "thresholds.md")))
	if !strings.Contains(table, "## Left out: at or above the op's timeout") || !strings.Contains(table, "| opensearch | bulk |  | p99 | 11734.5 ms (`os-bulk-p99`) | critical | 35s | 5s |") {
		t.Errorf("alerts/thresholds.md does not list the left-out thresholds:\n%s", table)
	}

	// With the op's real timeout in policy.op_timeouts the rules come back.
	b.Policy.OpTimeouts = map[string]model.Duration{"opensearch/bulk": model.Duration(time.Minute), "s3": model.Duration(30 * time.Second)}
	th, err := Thresholds(b)
	if err != nil {
		t.Fatal(err)
	}
	back := 0
	for _, x := range th {
		if x.Op == "bulk" || (x.Op == "get_8MiB" && x.Phase == "last_byte") {
			back++
		}
	}
	if back != 4 {
		t.Errorf("with op_timeouts, %d of the 4 left-out thresholds have a rule", back)
	}
	if got := OpTimeout(b.Policy, "s3", "get_4KiB"); got != 30*time.Second {
		t.Errorf("a backend-wide op_timeouts entry: %s", got)
	}
}

// TestRulesOnPrometheus3 checks the two Prometheus 3 changes the rules must
// survive (docs/alerts-dashboards.md): ranges are left-open, so every range
// holds at least 3 scrape intervals at the longest interval the rules are made
// for (1m), and classic le values are stored as floats ("12.0"), so no
// selector names a whole-number bound with an exact match.
func TestRulesOnPrometheus3(t *testing.T) {
	const maxScrape = time.Minute
	wholeLe := 0
	for _, g := range committedRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range rangeSel.FindAllStringSubmatch(r.Expr, -1) {
				d, err := model.ParseDuration(m[1])
				if err != nil {
					t.Fatal(err)
				}
				if time.Duration(d) < 3*maxScrape {
					t.Errorf("%s%s: range [%s] holds fewer than 2 samples at a %s scrape interval on Prometheus 3: %s", r.Alert, r.Record, m[1], maxScrape, r.Expr)
				}
			}
			for _, m := range leExact.FindAllStringSubmatch(r.Expr, -1) {
				if v, err := strconv.ParseFloat(m[1], 64); m[1] != "+Inf" && (err != nil || v == float64(int64(v))) {
					t.Errorf("%s: exact le=%q matches one spelling only: %s", r.Alert, m[1], r.Expr)
				}
			}
			wholeLe += strings.Count(r.Expr, `(\\.0)?"`)
		}
	}
	if wholeLe == 0 {
		t.Error(`no le=~"N(\\.0)?" selector: the test no longer sees the whole-number bounds`)
	}
	for v, want := range map[float64]string{12: `le=~"12(\\.0)?"`, 1: `le=~"1(\\.0)?"`, 0.023: `le="0.023"`, 6.7: `le="6.7"`, 0.0005: `le="0.0005"`} {
		if got := LeMatch(v); got != want {
			t.Errorf("LeMatch(%g) = %s, want %s", v, got, want)
		}
	}
	for v, want := range map[float64]string{12: "12.0", 1: "1.0", 0.023: "0.023", 60: "60.0"} {
		if got := floatLe(v); got != want {
			t.Errorf("floatLe(%g) = %s, want %s", v, got, want)
		}
	}
}

// TestCountsAreWholeNumbers: the alerts that count events show a whole
// number, not increase()'s extrapolation (the Cassandra kill -9 proof's page
// read "4.315 write(s) ... missing").
func TestCountsAreWholeNumbers(t *testing.T) {
	for _, g := range committedRules(t).Groups {
		for _, r := range g.Rules {
			switch r.Alert {
			case AlertDataIntegrity, AlertDurabilityLoss, AlertBacklog:
				d := r.Annotations["description"]
				if !strings.HasPrefix(d, `{{ $value | printf "%.0f" }} `) || strings.Contains(d, "humanize") {
					t.Errorf("%s: description does not start with a whole count: %s", r.Alert, d)
				}
			}
		}
	}
}

// TestAggregateBy: policy.aggregate_by adds its labels to every per-target
// grouping (sum by, and on) and to none of the joins with the baseline series.
func TestAggregateBy(t *testing.T) {
	b := shippedBaseline(t)
	plain, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Policy.AggregateBy = []string{"cluster", "vantage"}
	rf, err := Rules(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	grouping := regexp.MustCompile(`\b(?:by|on) \(([^)]*)\)`)
	n := 0
	for gi, g := range rf.Groups {
		for ri, r := range g.Rules {
			for _, m := range grouping.FindAllStringSubmatch(r.Expr, -1) {
				ls := strings.Split(m[1], ", ")
				if ls[0] != "target" {
					continue
				}
				n++
				if !slices.Contains(ls, "cluster") || !slices.Contains(ls, "vantage") {
					t.Errorf("%s%s: %q drops the aggregate_by labels", r.Alert, r.Record, m[0])
				}
			}
			// Nothing else changes.
			if strings.ReplaceAll(r.Expr, ", cluster, vantage)", ")") != plain.Groups[gi].Rules[ri].Expr {
				t.Errorf("%s%s: more than the groupings changed:\n%s\n%s", r.Alert, r.Record, r.Expr, plain.Groups[gi].Rules[ri].Expr)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d per-target groupings", n)
	}
	b.Policy.AggregateBy = []string{"target"}
	if err := b.Validate(); err == nil {
		t.Error("aggregate_by [target] (a label of the canary's own) is valid")
	}
}

// TestBoardPlaceVariables: every board has cluster, vantage and instance
// variables; every query selects on cluster and vantage, and the queries of
// raw series (not recording rules) on instance too.
func TestBoardPlaceVariables(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(repoRoot(), "dashboards", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("boards: %v %v", paths, err)
	}
	for _, p := range paths {
		var db struct {
			Templating struct {
				List []struct {
					Name string `json:"name"`
				} `json:"list"`
			} `json:"templating"`
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &db); err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		var vars []string
		for _, v := range db.Templating.List {
			vars = append(vars, v.Name)
		}
		if !slices.Equal(vars, []string{"datasource", "cluster", "vantage", "instance", "target"}) {
			t.Errorf("%s: variables %v", name, vars)
		}
		raw := regexp.MustCompile(`\bdbcanary_[a-z_]+\{[^}]*\}`)
		for _, panel := range db.Panels {
			for _, tg := range panel.Targets {
				for _, mt := range placeMatchers {
					if !strings.Contains(tg.Expr, mt) {
						t.Errorf("%s: panel %q: query lacks %s: %s", name, panel.Title, mt, tg.Expr)
					}
				}
				for _, sel := range raw.FindAllString(tg.Expr, -1) {
					if !strings.Contains(sel, instanceMatcher) {
						t.Errorf("%s: panel %q: raw series without %s: %s", name, panel.Title, instanceMatcher, sel)
					}
				}
			}
		}
	}
}
