package generate

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dbcanary/dbcanary/internal/baseline"
)

// PromTestFile is a `promtool test rules` file.
type PromTestFile struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	// GroupEvalOrder makes promtool evaluate the recording rules before the
	// alerts that read them at every step; without it the order is not fixed
	// and an alert may see the previous step's recording.
	GroupEvalOrder []string    `yaml:"group_eval_order"`
	Tests          []TestGroup `yaml:"tests"`
}

// TestGroup is one promtool test: input series and expected alerts.
type TestGroup struct {
	Name           string      `yaml:"name"`
	Interval       string      `yaml:"interval"`
	InputSeries    []Series    `yaml:"input_series"`
	AlertRuleTests []AlertTest `yaml:"alert_rule_test"`
}

// Series is an input series in promtool's expanding notation.
type Series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// AlertTest expects exactly ExpAlerts (none when empty) at EvalTime.
type AlertTest struct {
	EvalTime  string     `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []ExpAlert `yaml:"exp_alerts"`
}

// ExpAlert is one expected firing alert.
type ExpAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

// expander fills an alert's annotation templates for one expected alert: label
// references from labels, and each $value expression with the text Prometheus
// must render for the scenario's value (promtool then proves it does).
type expander struct {
	rules *RuleFile
}

func (e expander) rule(alert string, labels map[string]string) Rule {
	for _, g := range e.rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != alert {
				continue
			}
			match := true
			for k, v := range r.Labels {
				if lv, ok := labels[k]; ok && lv != v {
					match = false
				}
			}
			// Per-op rules share name and labels: their selector tells them apart.
			for _, k := range []string{"op", "phase"} {
				if v, ok := labels[k]; ok && strings.Contains(r.Expr, k+"=") && !strings.Contains(r.Expr, fmt.Sprintf(`%s="%s"`, k, v)) {
					match = false
				}
			}
			if match {
				return r
			}
		}
	}
	panic("no rule " + alert)
}

// expect builds an expected alert: labels are the series' labels plus the rule's.
func (e expander) expect(alert string, labels map[string]string, value string) ExpAlert {
	r := e.rule(alert, labels)
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	for k, v := range r.Labels {
		l[k] = v
	}
	ann := map[string]string{}
	for k, v := range r.Annotations {
		for lk, lv := range l {
			v = strings.ReplaceAll(v, "{{ $labels."+lk+" }}", lv)
		}
		for _, ve := range []string{"{{ $value }}", "{{ $value | humanizePercentage }}", "{{ $value | humanizeDuration }}",
			"{{ $value | humanize }}", `{{ printf "%.3f" $value }}`, wholeValue} {
			v = strings.ReplaceAll(v, ve, value)
		}
		ann[k] = v
	}
	return ExpAlert{ExpLabels: l, ExpAnnotations: ann}
}

func sel(name string, l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf(`%s="%s"`, k, l[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func merge(a map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// PromTests builds promtool tests: each alert fires on a scenario built to
// trip it (with its exact labels and rendered annotations) and stays silent on
// a healthy one. Only valid for the unscaled rules (TimeScale 1).
func PromTests(b *baseline.File, rules *RuleFile, ruleFile string) (*PromTestFile, error) {
	th, err := Thresholds(b)
	if err != nil {
		return nil, err
	}
	// The scenarios of the backend-wide alerts run on sample series: those
	// rules select no backend or op by name, so these labels (and the s3
	// ledger's below) are examples, not a case of their backend; they stay
	// as they are so the committed test file does not change. Per-op latency
	// scenarios follow the baseline's figures, whatever their backend.
	tl := map[string]string{"target": "rmq-1", "backend": "rabbitmq"}
	s := &scenarios{
		e:   expander{rules: rules},
		tl:  tl,
		op:  merge(tl, "op", "publish"),
		job: map[string]string{"job": b.Policy.Job, "instance": "canary-1:19190"},
	}
	s.exporter(b.Policy.Job)
	s.tls()
	s.target()
	s.storeNodes()
	s.stale()
	s.errorRatio()
	s.errorBudget(rules)
	s.integrity()
	s.backlog()
	s.drift()
	s.latency(th)
	var groups []string
	for _, g := range rules.Groups {
		groups = append(groups, g.Name)
	}
	return &PromTestFile{RuleFiles: []string{ruleFile}, EvaluationInterval: "1m", GroupEvalOrder: groups, Tests: s.tests}, nil
}

// scenarios collects promtool test groups, one method per alert family, in the
// order of the committed test file.
type scenarios struct {
	e     expander
	tl    map[string]string // the sample target's labels
	op    map[string]string // the sample op's labels
	job   map[string]string // the exporter's scrape labels
	tests []TestGroup
}

func (s *scenarios) group(name string, series []Series, at []AlertTest) {
	s.tests = append(s.tests, TestGroup{Name: name, Interval: "1m", InputSeries: series, AlertRuleTests: at})
}

func none(at, alert string) AlertTest { return AlertTest{EvalTime: at, Alertname: alert} }

func fires(at, alert string, exp ...ExpAlert) AlertTest {
	return AlertTest{EvalTime: at, Alertname: alert, ExpAlerts: exp}
}

// exporter: the exporter absent, down, and its config reload failing.
func (s *scenarios) exporter(job string) {
	e := s.e
	s.group("exporter absent: no dbcanary scrape target", []Series{{sel("up", map[string]string{"job": "other", "instance": "x:1"}), "1x20"}},
		[]AlertTest{none("4m", AlertExporterAbsent), fires("10m", AlertExporterAbsent, e.expect(AlertExporterAbsent, map[string]string{"job": job}, "1"))})
	s.group("exporter present", []Series{{sel("up", s.job), "1x20"}}, []AlertTest{none("10m", AlertExporterAbsent), none("10m", AlertExporterDown)})
	s.group("exporter down", []Series{{sel("up", s.job), "0x20"}},
		[]AlertTest{none("1m", AlertExporterDown), fires("5m", AlertExporterDown, e.expect(AlertExporterDown, s.job, "0"))})

	s.group("config reload failed", []Series{{sel("dbcanary_config_last_reload_successful", s.job), "1 1 0x20"}},
		[]AlertTest{none("1m", AlertConfigReloadFailed), none("5m", AlertConfigReloadFailed),
			fires("10m", AlertConfigReloadFailed, e.expect(AlertConfigReloadFailed, s.job, "0"))})
	s.group("config reload fine", []Series{{sel("dbcanary_config_last_reload_successful", s.job), "1x20"}}, []AlertTest{none("10m", AlertConfigReloadFailed)})

	// A state directory full for a few minutes is a ticket after 5; a save
	// that fails once and then succeeds is nothing.
	led := map[string]string{"job": job, "instance": "dbcanary:9190", "target": "mq", "backend": "rabbitmq"}
	s.group("ledger not saved", []Series{{sel("dbcanary_ledger_last_save_successful", led), "1 1 0x20"}},
		[]AlertTest{none("5m", AlertLedgerNotSaved), fires("10m", AlertLedgerNotSaved, e.expect(AlertLedgerNotSaved, led, "0"))})
	s.group("ledger saved again", []Series{{sel("dbcanary_ledger_last_save_successful", led), "1 0 0 1x20"}}, []AlertTest{none("10m", AlertLedgerNotSaved)})
}

// tls: the store's first certificate to expire: 10 days, then 3 days, then
// expired an hour ago, at the 30-minute evaluation (time() = 1800).
func (s *scenarios) tls() {
	e, tl := s.e, s.tl
	certSel := sel("dbcanary_tls_earliest_cert_expiry_timestamp_seconds", tl)
	warnL, critL := merge(tl, "severity", "warning"), merge(tl, "severity", "critical")
	s.group("tls certificate expires in 10 days: a ticket", []Series{{certSel, "864000x40"}},
		[]AlertTest{none("10m", AlertTLSCertExpiring), fires("30m", AlertTLSCertExpiring, e.expect(AlertTLSCertExpiring, warnL, "9d 23h 30m 0s"))})
	s.group("tls certificate expires in 3 days: a page, not also a ticket", []Series{{certSel, "259200x40"}},
		[]AlertTest{fires("30m", AlertTLSCertExpiring, e.expect(AlertTLSCertExpiring, critL, "2d 23h 30m 0s"))})
	s.group("tls certificate expired", []Series{{certSel, "-1800x40"}},
		[]AlertTest{fires("30m", AlertTLSCertExpiring, e.expect(AlertTLSCertExpiring, critL, "-1h 0m 0s"))})
	s.group("tls certificate valid for 90 days", []Series{{certSel, "7776000x40"}}, []AlertTest{none("30m", AlertTLSCertExpiring)})
}

// target: a target down, up, and misconfigured.
func (s *scenarios) target() {
	e, tl := s.e, s.tl
	s.group("target down", []Series{{sel("dbcanary_target_up", tl), "1 0x20"}},
		[]AlertTest{none("2m", AlertTargetDown), fires("5m", AlertTargetDown, e.expect(AlertTargetDown, tl, "0"))})
	s.group("target up", []Series{{sel("dbcanary_target_up", tl), "1x20"}}, []AlertTest{none("10m", AlertTargetDown), none("10m", AlertTargetMisconfigured)})
	// Wrong credentials or a missing bucket: one page, as a setup problem.
	s.group("target misconfigured", []Series{{sel("dbcanary_target_up", tl), "1 0x20"}, {sel("dbcanary_target_misconfigured", tl), "0 1x20"}},
		[]AlertTest{none("2m", AlertTargetMisconfigured), fires("5m", AlertTargetMisconfigured, e.expect(AlertTargetMisconfigured, tl, "1")),
			none("5m", AlertTargetDown)})
}

// storeNodes: one node of three down from 1m while the target serves: a ticket
// after 5 minutes, naming the node; nothing while the target is down too.
func (s *scenarios) storeNodes() {
	e, tl := s.e, s.tl
	node := func(n string) map[string]string { return merge(tl, "node", n) }
	s.group("store node down while the target serves", []Series{{sel("dbcanary_target_up", tl), "1x20"},
		{sel("dbcanary_store_node_up", node("10.0.0.11:9042")), "1 0x20"}, {sel("dbcanary_store_node_up", node("10.0.0.12:9042")), "1x20"}},
		[]AlertTest{none("5m", AlertStoreNodeDown), fires("7m", AlertStoreNodeDown, e.expect(AlertStoreNodeDown, merge(node("10.0.0.11:9042"), "severity", "warning"), "0"))})
	s.group("store node down while the target is down: no ticket", []Series{{sel("dbcanary_target_up", tl), "1 0x20"},
		{sel("dbcanary_store_node_up", node("10.0.0.11:9042")), "1 0x20"}},
		[]AlertTest{none("10m", AlertStoreNodeDown)})
	s.group("store node back", []Series{{sel("dbcanary_target_up", tl), "1x20"}, {sel("dbcanary_store_node_up", node("10.0.0.11:9042")), "1 0x3 1x20"}},
		[]AlertTest{none("3m", AlertStoreNodeDown), none("10m", AlertStoreNodeDown)})
	// Two nodes of three down from 1m while the target is still served (an
	// OpenSearch node alone without a cluster manager): a page after 2m; one
	// of three: none; two of three with the target down: TargetDown's page only.
	three := func(up1, up2, up3 string) []Series {
		return []Series{{sel("dbcanary_store_node_up", node("10.0.0.11:9042")), up1},
			{sel("dbcanary_store_node_up", node("10.0.0.12:9042")), up2}, {sel("dbcanary_store_node_up", node("10.0.0.13:9042")), up3}}
	}
	s.group("majority of the store's nodes down while the target serves", append(three("1 0x20", "1 0x20", "1x20"), Series{sel("dbcanary_target_up", tl), "1x20"}),
		[]AlertTest{none("2m", AlertStoreMajorityDown), fires("4m", AlertStoreMajorityDown, e.expect(AlertStoreMajorityDown, merge(tl, "severity", "critical"), "2"))})
	s.group("one node of three down: no page", append(three("1 0x20", "1x20", "1x20"), Series{sel("dbcanary_target_up", tl), "1x20"}),
		[]AlertTest{none("10m", AlertStoreMajorityDown)})
	s.group("majority down with the target down: TargetDown's page only", append(three("1 0x20", "1 0x20", "1x20"), Series{sel("dbcanary_target_up", tl), "1 0x20"}),
		[]AlertTest{none("10m", AlertStoreMajorityDown)})
}

// stale: successes every minute until 5m, then none: at 15m the last was 10m ago.
func (s *scenarios) stale() {
	e, op := s.e, s.op
	rate1 := Series{sel("dbcanary_op_expected_rate", op), "1x30"}
	s.group("canary stale", []Series{{sel("dbcanary_last_success_timestamp_seconds", op), "0+60x5 300x20"}, rate1},
		[]AlertTest{none("9m", AlertStale), fires("15m", AlertStale, e.expect(AlertStale, op, "10m 0s"))})
	s.group("canary fresh", []Series{{sel("dbcanary_last_success_timestamp_seconds", op), "0+60x20"}, rate1}, []AlertTest{none("15m", AlertStale)})
	// One run per 10 minutes: 10 minutes without a success is on schedule.
	s.group("slow op is not stale between its runs", []Series{{sel("dbcanary_last_success_timestamp_seconds", op), "0+60x5 300x20"},
		{sel("dbcanary_op_expected_rate", op), "0.0016666666666666668x30"}}, []AlertTest{none("15m", AlertStale)})
	s.group("an op that never succeeded is not stale (it is down)", []Series{{sel("dbcanary_last_success_timestamp_seconds", op), "0x30"}, rate1},
		[]AlertTest{none("20m", AlertStale)})
	// A 12-minute outage that pages as down: its staleness is the same fault and
	// never fires beside the page. Firing under Alertmanager's inhibition, it
	// could be sent as a ticket at the very evaluation the outage ended (the
	// inhibiting page resolved, the stale alert's resolution not yet sent).
	s.group("stale during an outage that paged as down: quiet", []Series{{sel("dbcanary_last_success_timestamp_seconds", op), "0+60x5 300x12 1080+60x10"}, rate1,
		{sel("dbcanary_target_up", s.tl), "1x5 0x12 1x10"}},
		[]AlertTest{fires("11m", AlertTargetDown, e.expect(AlertTargetDown, s.tl, "0")), none("11m", AlertStale), none("14m", AlertStale), none("17m", AlertStale), none("20m", AlertStale)})
}

// failingSeries: 0.9 successes and 0.1 failures per second, a 10 % error ratio.
func (s *scenarios) failingSeries() []Series {
	return []Series{
		{sel("dbcanary_op_latency_seconds_count", merge(s.op, "result", "ok")), "0+54x100"},
		{sel("dbcanary_op_failures_total", merge(s.op, "cause", "timeout")), "0+6x100"},
		{sel("dbcanary_op_expected_rate", s.op), "1x100"},
	}
}

// errorRatio: a 10 % error ratio, none, and two failures at a low rate.
func (s *scenarios) errorRatio() {
	e, op := s.e, s.op
	healthy := []Series{
		{sel("dbcanary_op_latency_seconds_count", merge(op, "result", "ok")), "0+60x100"},
		{sel("dbcanary_op_failures_total", merge(op, "cause", "timeout")), "0x100"},
		{sel("dbcanary_op_expected_rate", op), "1x100"},
	}
	s.group("error ratio 10 %", s.failingSeries(), []AlertTest{none("4m", AlertErrorRatioHigh), fires("15m", AlertErrorRatioHigh, e.expect(AlertErrorRatioHigh, op, "10%"))})
	s.group("error ratio 0", healthy, []AlertTest{none("15m", AlertErrorRatioHigh), none("70m", AlertErrorBudgetBurn)})
	// An op at 0.06/s: two failures in 5 minutes are a 11 % ratio, not a pattern.
	s.group("error ratio: two failures at a low rate", []Series{
		{sel("dbcanary_op_latency_seconds_count", merge(op, "result", "ok")), "0+4x4 16 18 20 22 24 26 28 30 32 34 36 38 40 42 44 46"},
		{sel("dbcanary_op_failures_total", merge(op, "cause", "timeout")), "0x4 1 2x15"},
		{sel("dbcanary_op_expected_rate", op), "0.06x20"},
	}, []AlertTest{none("8m", AlertErrorRatioHigh), none("12m", AlertErrorRatioHigh)})
	// A 7-minute outage that paged as down: its error ratio is the same fault,
	// quiet during it and for 5 minutes after, while its failures stay in the
	// window (make soak-chaos, MinIO stopped: a ticket after the incident was
	// over). Firing during the outage for Alertmanager to inhibit, it reached
	// the ticket queue when its "for:" ended at the very evaluation the outage
	// did (make soak-chaos, OpenSearch flood stage: the page's resolution was
	// sent before the ratio's, and Alertmanager flushed between the two).
	s.group("error ratio: after an outage that paged as down", []Series{
		{sel("dbcanary_op_latency_seconds_count", merge(op, "result", "ok")), "0+60x5 300x6 360+60x20"},
		{sel("dbcanary_op_failures_total", merge(op, "cause", "refused")), "0x5 60+60x6 420x20"},
		{sel("dbcanary_op_expected_rate", op), "1x32"},
		{sel("dbcanary_target_up", s.tl), "1x5 0x6 1x20"},
	}, []AlertTest{fires("10m", AlertTargetDown, e.expect(AlertTargetDown, s.tl, "0")), none("10m", AlertErrorRatioHigh), none("12m", AlertErrorRatioHigh),
		none("14m", AlertErrorRatioHigh), none("16m", AlertErrorRatioHigh)})
}

// errorBudget: what burns the error budget and what does not.
func (s *scenarios) errorBudget(rules *RuleFile) {
	e, op, tl := s.e, s.op, s.tl
	// 10 s of errors at 1 op/s, 5 minutes after the daemon started: not a
	// 3 % ratio over "1h", 0.28 % of the hour's expected attempts.
	s.group("error budget: a short burst in a fresh daemon", []Series{
		{sel("dbcanary_op_latency_seconds_count", merge(op, "result", "ok")), "0+60x5 290+60x30"},
		{sel("dbcanary_op_failures_total", merge(op, "cause", "refused")), "0x5 10x30"},
		{sel("dbcanary_op_expected_rate", op), "1x35"},
	}, []AlertTest{none("7m", AlertErrorBudgetBurn), none("9m", AlertErrorBudgetBurn)})
	// Corrupted reads page as data integrity, not also as an availability burn.
	s.group("error budget: data failures are not unavailability", []Series{
		{sel("dbcanary_op_latency_seconds_count", merge(op, "result", "ok")), "0+54x100"},
		{sel("dbcanary_op_failures_total", merge(op, "cause", "mismatch")), "0+6x100"},
		{sel("dbcanary_op_expected_rate", op), "1x100"},
	}, []AlertTest{none("70m", AlertErrorBudgetBurn)})
	// A hard outage pages as DbcanaryTargetDown, not also as a burn.
	s.group("error budget: an outage that paged as down", []Series{
		{sel("dbcanary_op_latency_seconds_count", merge(op, "result", "ok")), "0+60x5 300x30"},
		{sel("dbcanary_op_failures_total", merge(op, "cause", "refused")), "0x5 60+60x30"},
		{sel("dbcanary_op_expected_rate", op), "1x35"},
		{sel("dbcanary_target_up", tl), "1x5 0x30"},
	}, []AlertTest{fires("12m", AlertTargetDown, e.expect(AlertTargetDown, tl, "0")), none("12m", AlertErrorBudgetBurn)})
	// A 10 % error ratio burns a 0.1 % budget 100x: both page windows and both
	// ticket windows trip. The ratio is over the attempts expected in the whole
	// window, and the series is 70 minutes old: in the windows longer than it,
	// its 420 failures are divided by the window's expected attempts.
	burnValue := map[string]string{"1h": "10%", "6h": "1.944%", "1d": "0.4861%", "3d": "0.162%"}
	burn := []ExpAlert{}
	for _, r := range rules.Groups[2].Rules {
		if r.Alert == AlertErrorBudgetBurn {
			burn = append(burn, e.expect(AlertErrorBudgetBurn, merge(tl, "severity", r.Labels["severity"], "window", r.Labels["window"]), burnValue[r.Labels["window"]]))
		}
	}
	s.group("error budget burn", s.failingSeries(), []AlertTest{none("1m", AlertErrorBudgetBurn), fires("70m", AlertErrorBudgetBurn, burn...)})
}

// integrity: data-integrity failures and the durability ledger's losses.
func (s *scenarios) integrity() {
	e, op := s.e, s.op
	for _, cause := range []string{"mismatch", "lost", "not_found"} {
		l := merge(op, "cause", cause)
		// 8m, not 10m: Prometheus 3's ranges are left-open, so at 10m the
		// 5m range no longer holds the last 0 before the step at 6m.
		s.group("data integrity: "+cause, []Series{{sel("dbcanary_op_failures_total", l), "0x5 1x10"}},
			[]AlertTest{none("5m", AlertDataIntegrity), fires("8m", AlertDataIntegrity, e.expect(AlertDataIntegrity, l, "1")), none("16m", AlertDataIntegrity)})
	}
	for _, result := range []string{"missing", "corrupted"} {
		ll := map[string]string{"target": "s3-1", "backend": "s3", "age": "10m", "result": result}
		s.group("durability loss: "+result, []Series{
			{sel("dbcanary_ledger_checks_total", ll), "0x5 1x10"},
			{sel("dbcanary_ledger_checks_total", merge(ll, "result", "intact")), "0+3x15"},
			{sel("dbcanary_op_failures_total", map[string]string{"target": "s3-1", "backend": "s3", "op": "ledger_check", "cause": "not_found"}), "0x5 1x10"},
		}, []AlertTest{none("5m", AlertDurabilityLoss), fires("8m", AlertDurabilityLoss, e.expect(AlertDurabilityLoss, ll, "1")),
			none("8m", AlertDataIntegrity), none("16m", AlertDurabilityLoss)})
	}
	s.group("durability: intact checks do not page", []Series{
		{sel("dbcanary_ledger_checks_total", map[string]string{"target": "s3-1", "backend": "s3", "age": "1m", "result": "intact"}), "0+3x15"},
		{sel("dbcanary_ledger_checks_total", map[string]string{"target": "s3-1", "backend": "s3", "age": "1m", "result": "missing"}), "0x15"},
	}, []AlertTest{none("10m", AlertDurabilityLoss)})
	s.group("data integrity: other causes do not count", []Series{
		{sel("dbcanary_op_failures_total", merge(op, "cause", "timeout")), "0x5 1x10"},
		{sel("dbcanary_op_failures_total", merge(op, "cause", "backlog")), "0x5 1x10"},
	}, []AlertTest{none("10m", AlertDataIntegrity)})
}

// backlog: ops the scheduler could not start, and none.
func (s *scenarios) backlog() {
	e, op := s.e, s.op
	s.group("backlog", []Series{{sel("dbcanary_op_failures_total", merge(op, "cause", "backlog")), "0+1x20"}},
		[]AlertTest{fires("10m", AlertBacklog, e.expect(AlertBacklog, op, "5"))})
	s.group("no backlog", []Series{{sel("dbcanary_op_failures_total", merge(op, "cause", "backlog")), "0x20"}}, []AlertTest{none("10m", AlertBacklog)})
}

// drift: a day at p99 ≈ 9.9 ms (all samples ≤ 10 ms), then all samples in (10, 23] ms.
func (s *scenarios) drift() {
	e, op := s.e, s.op
	driftOp := merge(op, "result", "ok")
	drifted := []Series{
		{sel("dbcanary_op_latency_seconds_bucket", merge(driftOp, "le", "0.01")), "0+60x1500 90000x100"},
		{sel("dbcanary_op_latency_seconds_bucket", merge(driftOp, "le", "0.023")), "0+60x1500 90060+60x100"},
		{sel("dbcanary_op_latency_seconds_bucket", merge(driftOp, "le", "+Inf")), "0+60x1500 90060+60x100"},
	}
	steady := []Series{
		{sel("dbcanary_op_latency_seconds_bucket", merge(driftOp, "le", "0.01")), "0+60x1600"},
		{sel("dbcanary_op_latency_seconds_bucket", merge(driftOp, "le", "0.023")), "0+60x1600"},
		{sel("dbcanary_op_latency_seconds_bucket", merge(driftOp, "le", "+Inf")), "0+60x1600"},
	}
	s.group("latency drift", drifted, []AlertTest{none("1500m", AlertLatencyDrift),
		fires("1560m", AlertLatencyDrift, e.expect(AlertLatencyDrift, merge(op, "quantile", "0.99"), "0.023"))})
	s.group("no latency drift", steady, []AlertTest{none("1560m", AlertLatencyDrift)})
}

// thresholdKey names one latency threshold pair (warning and critical).
type thresholdKey struct{ backend, op, phase, target string }

// thresholdPairs pairs each op's warning and critical thresholds, in the order
// the first of each pair appears.
func thresholdPairs(th []Threshold) (map[thresholdKey][2]Threshold, []thresholdKey) {
	pairs := map[thresholdKey][2]Threshold{}
	var order []thresholdKey
	for _, t := range th {
		k := thresholdKey{t.Backend, t.Op, t.Phase, t.Target}
		p, seen := pairs[k]
		if !seen {
			order = append(order, k)
		}
		if t.Severity == "warning" {
			p[0] = t
		} else {
			p[1] = t
		}
		pairs[k] = p
	}
	return pairs, order
}

// latency: per threshold pair, samples just above the warning bound (warning
// only), above the critical bound (both), and in the lowest bucket (none); the
// first pair also carries the scenarios that must not page as slow.
func (s *scenarios) latency(th []Threshold) {
	pairs, order := thresholdPairs(th)
	for _, k := range order {
		w, c := pairs[k][0], pairs[k][1]
		if w.Severity == "" {
			continue // both at or above the op's timeout: no rule
		}
		hasCritical := c.Severity != ""
		if !hasCritical {
			c = w // the critical threshold is at or above the op's timeout: no rule of its own
		}
		p := s.newLatencyPair(k, w, c)
		s.latencyPair(p, w, c, hasCritical)
		if k == order[0] {
			s.latencyNotSlow(p)
		}
	}
}

// latencyPair is one threshold pair's series and expected alerts.
type latencyPair struct {
	name      string
	l         map[string]string // target, backend, op
	metric    string
	sl        map[string]string // the histogram's labels but le
	les       []float64         // the bucket bounds around both thresholds
	al        map[string]string // the alert's labels but severity and figure
	nc        float64           // the bucket bound above the critical threshold
	aboveBoth []ExpAlert        // the alerts above the critical bound
}

func (s *scenarios) newLatencyPair(k thresholdKey, w, c Threshold) *latencyPair {
	l := map[string]string{"target": k.backend + "-1", "backend": k.backend, "op": k.op}
	if k.target != "" {
		l["target"] = k.target // a target's own threshold
	}
	p := &latencyPair{name: fmt.Sprintf("latency %s %s %s", k.backend, k.op, k.phase), l: l,
		metric: "dbcanary_op_latency_seconds_bucket", sl: merge(l, "result", "ok")}
	if k.phase != "" {
		p.metric = "dbcanary_op_phase_seconds_bucket"
		p.sl = merge(l, "phase", k.phase)
	}
	p.les = uniq(w.Bound, nextBound(w.Bound), c.Bound, nextBound(c.Bound))
	p.al = merge(l, "quantile", qs(w.Quantile))
	if k.phase != "" {
		p.al["phase"] = k.phase
	}
	p.nc = nextBound(c.Bound)
	return p
}

// bucketSeries puts every sample in the bucket ending at upper.
func (p *latencyPair) bucketSeries(upper float64) []Series {
	var s []Series
	for _, le := range append(p.les, math.Inf(1)) {
		vals := "0x20"
		if le >= upper {
			vals = "0+60x20"
		}
		s = append(s, Series{sel(p.metric, merge(p.sl, "le", leString(le))), vals})
	}
	return s
}

// latencyPair: above warning, above critical (also with le as Prometheus 3
// spells it), and below the baseline.
func (s *scenarios) latencyPair(p *latencyPair, w, c Threshold, hasCritical bool) {
	exp := func(t Threshold, v float64) ExpAlert {
		return s.e.expect(AlertLatencyAboveBaseline, merge(p.al, "severity", t.Severity, "figure", t.Figure.ID), fmt.Sprintf("%.3f", v))
	}
	nw := nextBound(w.Bound)
	vw := w.Bound + (nw-w.Bound)*w.Quantile
	s.group(p.name+": above warning", p.bucketSeries(nw), []AlertTest{none("5m", AlertLatencyAboveBaseline),
		fires("15m", AlertLatencyAboveBaseline, exp(w, vw))})
	vc := c.Bound + (p.nc-c.Bound)*c.Quantile
	p.aboveBoth = []ExpAlert{exp(w, vc)}
	if hasCritical {
		p.aboveBoth = append(p.aboveBoth, exp(c, vc))
	}
	s.group(p.name+": above critical", p.bucketSeries(p.nc), []AlertTest{fires("15m", AlertLatencyAboveBaseline, p.aboveBoth...)})
	s.group(p.name+": below baseline", p.bucketSeries(p.les[0]), []AlertTest{none("15m", AlertLatencyAboveBaseline)})
	// Above critical with every bound spelt as Prometheus 3 (and any
	// OpenMetrics scrape) stores it: le="1.0", not "1" (pairs with a
	// whole-number bound, where the spellings differ).
	if slices.ContainsFunc(p.les, func(v float64) bool { return v == math.Trunc(v) }) {
		var p3 []Series
		for _, s := range p.bucketSeries(p.nc) {
			p3 = append(p3, Series{promLe.ReplaceAllStringFunc(s.Series, func(m string) string {
				v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(m, `le="`), `"`), 64)
				return `le="` + floatLe(v) + `"`
			}), s.Values})
		}
		s.group(p.name+": above critical, le as Prometheus 3 stores it", p3, []AlertTest{fires("15m", AlertLatencyAboveBaseline, p.aboveBoth...)})
	}
}

// latencyNotSlow: one slow sample, a short burst, a target down and a
// blinking target_up, none of which is a slow store.
func (s *scenarios) latencyNotSlow(p *latencyPair) {
	// One slow sample among few is not a slow store: every sample fast
	// but one above the critical bound at 5m; 12 samples in each 5m window.
	var one []Series
	for _, le := range append(p.les, math.Inf(1)) {
		vals := "0+12x20"
		if le < p.nc {
			vals = "0+12x5 59+12x15"
		}
		one = append(one, Series{sel(p.metric, merge(p.sl, "le", leString(le))), vals})
	}
	s.group(p.name+": one slow sample", one, []AlertTest{none("7m", AlertLatencyAboveBaseline), none("9m", AlertLatencyAboveBaseline)})
	// A 2-minute burst of slow samples (an outage's timeouts) that the 5m
	// window remembers for 5 minutes: not slowness that lasts the for:.
	var burst []Series
	for _, le := range append(p.les, math.Inf(1)) {
		vals := "0+12x30"
		if le < p.nc {
			vals = "0+12x5 60x2 84+12x23"
		}
		burst = append(burst, Series{sel(p.metric, merge(p.sl, "le", leString(le))), vals})
	}
	s.group(p.name+": a 2-minute burst", burst, []AlertTest{none("8m", AlertLatencyAboveBaseline), none("10m", AlertLatencyAboveBaseline), none("12m", AlertLatencyAboveBaseline)})
	// Unreachable: pages as down, not also as slow.
	tgt := map[string]string{"target": p.l["target"], "backend": p.l["backend"]}
	s.group(p.name+": target down", append(p.bucketSeries(p.nc), Series{sel("dbcanary_target_up", tgt), "0x20"}),
		[]AlertTest{fires("15m", AlertTargetDown, s.e.expect(AlertTargetDown, tgt, "0")), none("15m", AlertLatencyAboveBaseline)})
	// One op timing out now and then makes target_up blink to 0: that
	// must not reset a latency alert that is really pending.
	s.group(p.name+": target_up blinks", append(p.bucketSeries(p.nc), Series{sel("dbcanary_target_up", tgt), "1 0 1 1 0 1 1 0 1 1 0 1 1 0 1 1 0 1 1 0 1"}),
		[]AlertTest{fires("15m", AlertLatencyAboveBaseline, p.aboveBoth...)})
}

func uniq(v ...float64) []float64 {
	sort.Float64s(v)
	var out []float64
	for i, x := range v {
		if i == 0 || x != v[i-1] {
			out = append(out, x)
		}
	}
	return out
}

var promLe = regexp.MustCompile(`le="[^"]*"`)

// floatLe is a bound as Prometheus 3 stores it (its textparse
// formatOpenMetricsFloat): Go's shortest form, with ".0" on whole numbers.
func floatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

func leString(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return qs(le)
}

// Marshal renders the test file with a generated-file header.
func (f *PromTestFile) Marshal(opt Options) ([]byte, error) {
	opt = opt.withDefaults()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Generated by `dbcanary generate rules --baseline %s`. DO NOT EDIT.\n# promtool unit tests: every alert fires on a scenario built to trip it and stays silent on a healthy one.\n", opt.BaselineName)
	return appendYAML(&buf, f)
}

// RuleFiles renders everything `generate rules` writes, by path under alerts/.
func RuleFiles(b *baseline.File, opt Options) (map[string][]byte, error) {
	opt = opt.withDefaults()
	rf, err := Rules(b, opt)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	if out["dbcanary-rules.yml"], err = rf.Marshal(opt); err != nil {
		return nil, err
	}
	if opt.TimeScale != 1 {
		return out, nil // scenarios assume the shipped durations
	}
	tf, err := PromTests(b, rf, "../dbcanary-rules.yml")
	if err != nil {
		return nil, err
	}
	if out["tests/dbcanary-rules_test.yml"], err = tf.Marshal(opt); err != nil {
		return nil, err
	}
	out["thresholds.md"] = ThresholdTable(b)
	return out, nil
}
