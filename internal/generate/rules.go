// Package generate turns a baseline file (internal/baseline) into the
// Prometheus recording and alerting rules, their promtool unit tests and the
// Grafana dashboards, so every threshold traces back to a documented figure.
package generate

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/baseline"
)

// DefaultRunbookURL is docs/runbooks.md as published with the repository.
const DefaultRunbookURL = "https://github.com/dbcanary/dbcanary/blob/main/docs/runbooks.md"

// Options tune generation.
type Options struct {
	// BaselineName is the baseline file as named in the generated headers.
	BaselineName string
	// TimeScale multiplies every for:, rate window and offset (1 for the shipped
	// rules; tests use e.g. 0.05 so 5m windows become 15s).
	TimeScale float64
	// RunbookURL is the runbook document; alerts link to its sections.
	RunbookURL string
	// For overrides the `for:` of alerts by name, or by "name:severity"
	// (which wins), leaving every window as shipped. Only tests set it: the
	// page-quality suite runs the shipped rules with shorter `for:`.
	For map[string]time.Duration
}

// forOf is an alert's `for:` after any test override.
func (o Options) forOf(alert, severity string, d time.Duration) string {
	if v, ok := o.For[alert+":"+severity]; ok {
		return model.Duration(v).String()
	}
	if v, ok := o.For[alert]; ok {
		return model.Duration(v).String()
	}
	if d == 0 {
		return ""
	}
	return o.dur(d)
}

func (o Options) withDefaults() Options {
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.RunbookURL == "" {
		o.RunbookURL = DefaultRunbookURL
	}
	if o.BaselineName == "" {
		o.BaselineName = "baselines/james-reference.yaml"
	}
	return o
}

// dur formats a duration scaled by TimeScale, never below 1s.
func (o Options) dur(d time.Duration) string {
	s := time.Duration(float64(d) * o.TimeScale).Round(time.Second)
	if s < time.Second {
		s = time.Second
	}
	return model.Duration(s).String()
}

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one rule group.
type RuleGroup struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// Rule is a recording or alerting rule.
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
	// Comment is written as a YAML comment above the rule (e.g. a pint
	// directive); Prometheus ignores it.
	Comment string `yaml:"-"`
}

// Recording rule names, level:metric:operations. The window in a name is the
// shipped one even when TimeScale shortens it for a test.
const (
	RecLatencyQuantile   = "target_op:dbcanary_op_latency_seconds:quantile_rate5m"
	RecLatencyQuantile1h = "target_op:dbcanary_op_latency_seconds:quantile_rate1h"
	RecPhaseQuantile     = "target_op_phase:dbcanary_op_phase_seconds:quantile_rate5m"
	RecOpsRate           = "target_op_result:dbcanary_op_latency_seconds_count:rate5m"
	RecFailuresRate      = "target_op_cause:dbcanary_op_failures:rate5m"
	RecOpErrorRatio      = "target_op:dbcanary_op_errors:ratio_rate5m"
	RecTargetErrorRatio  = "target:dbcanary_op_errors:ratio_rate" // + window
	RecBytesRate         = "target_op_direction:dbcanary_op_bytes:rate5m"
	RecLatencyBaseline   = "backend_op:dbcanary_op_latency_seconds:baseline"
	RecPhaseBaseline     = "backend_op_phase:dbcanary_op_phase_seconds:baseline"
)

// Alert names (docs/runbooks.md has a section for each).
const (
	AlertExporterAbsent       = "DbcanaryExporterAbsent"
	AlertExporterDown         = "DbcanaryExporterDown"
	AlertConfigReloadFailed   = "DbcanaryConfigReloadFailed"
	AlertLedgerNotSaved       = "DbcanaryLedgerNotSaved"
	AlertTargetDown           = "DbcanaryTargetDown"
	AlertTargetMisconfigured  = "DbcanaryTargetMisconfigured"
	AlertStale                = "DbcanaryCanaryStale"
	AlertErrorRatioHigh       = "DbcanaryErrorRatioHigh"
	AlertDataIntegrity        = "DbcanaryDataIntegrityFailure"
	AlertDurabilityLoss       = "DbcanaryDurabilityLoss"
	AlertBacklog              = "DbcanaryBacklog"
	AlertErrorBudgetBurn      = "DbcanaryErrorBudgetBurn"
	AlertLatencyDrift         = "DbcanaryLatencyDrift"
	AlertLatencyAboveBaseline = "DbcanaryLatencyAboveBaseline"
	AlertTLSCertExpiring      = "DbcanaryTLSCertificateExpiring"
	AlertStoreNodeDown        = "DbcanaryStoreNodeDown"
	AlertStoreMajorityDown    = "DbcanaryStoreMajorityDown"
)

// AlertNames lists every alert, for the runbook and test coverage checks.
var AlertNames = []string{AlertExporterAbsent, AlertExporterDown, AlertConfigReloadFailed, AlertLedgerNotSaved, AlertTargetDown, AlertTargetMisconfigured,
	AlertStale, AlertErrorRatioHigh, AlertDataIntegrity, AlertDurabilityLoss, AlertBacklog, AlertErrorBudgetBurn, AlertLatencyDrift,
	AlertLatencyAboveBaseline, AlertTLSCertExpiring, AlertStoreNodeDown, AlertStoreMajorityDown}

// wholeValue renders a count an alert read with increase(): Prometheus
// extrapolates increase() to the window's edges (4 events can read 4.315),
// and a page counts events, so it shows the nearest whole number.
const wholeValue = `{{ $value | printf "%.0f" }}`

// notAvailability are the causes the availability budget leaves out: the
// store answered (data causes page on their own; stale is allowed by the
// configured consistency).
const notAvailability = "mismatch|not_found|lost|stale"

// Quantiles recorded per target and op.
var Quantiles = []float64{0.5, 0.9, 0.99}

// Burn-rate windows of the Google SRE workbook (ch. 5, multiwindow,
// multi-burn-rate) for a 30-day SLO: a factor spends that share of the budget.
var burnWindows = []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour, 72 * time.Hour}

var burnAlerts = []struct {
	severity    string
	long, short time.Duration
	factor      float64
	forDur      time.Duration
}{
	{"critical", time.Hour, 5 * time.Minute, 14.4, 2 * time.Minute},   // 2 % of the budget in 1h: page
	{"critical", 6 * time.Hour, 30 * time.Minute, 6, 2 * time.Minute}, // 5 % in 6h: page
	{"warning", 24 * time.Hour, 2 * time.Hour, 3, 15 * time.Minute},   // 10 % in 1d: ticket
	{"warning", 72 * time.Hour, 6 * time.Hour, 1, 15 * time.Minute},   // 10 % in 3d: ticket
}

func windowName(d time.Duration) string { return model.Duration(d).String() }

func qs(q float64) string { return strconv.FormatFloat(q, 'f', -1, 64) }

func (o Options) runbook(alert string) string { return o.RunbookURL + "#" + strings.ToLower(alert) }

// Rules builds the rule file: recording rules, the baselines as series, the
// alerts (one function per family) and the per-op latency thresholds.
func Rules(b *baseline.File, opt Options) (*RuleFile, error) {
	opt = opt.withDefaults()
	th, err := Thresholds(b)
	if err != nil {
		return nil, err
	}
	p := b.Policy
	al := RuleGroup{Name: "dbcanary-alerts"}
	for _, family := range [][]Rule{exporterAlerts(p, opt), targetAlerts(opt), opAlerts(p, opt), burnRateAlerts(p, opt),
		{driftAlert(p, opt)}, certRules(p, opt)} {
		al.Rules = append(al.Rules, family...)
	}
	lat := RuleGroup{Name: "dbcanary-latency-baseline"}
	for _, t := range th {
		lat.Rules = append(lat.Rules, latencyRule(t, p.MinSlowSamples, opt))
	}
	groups := []RuleGroup{recordingRules(opt), baselineRules(b), al, lat}
	for _, g := range groups {
		for i := range g.Rules {
			g.Rules[i].Expr = keepLabels(g.Rules[i].Expr, p.AggregateBy)
		}
	}
	return &RuleFile{Groups: groups}, nil
}

func add(g *RuleGroup, r Rule) { g.Rules = append(g.Rules, r) }

// alert is an alerting rule with its severity, for: and annotations.
func (o Options) alert(name, expr string, forDur time.Duration, sev, summary, desc string) Rule {
	return Rule{Alert: name, Expr: expr, Labels: map[string]string{"severity": sev}, For: o.forOf(name, sev, forDur),
		Annotations: map[string]string{"summary": summary, "description": desc, "runbook_url": o.runbook(name)}}
}

// recordingRules are the quantiles, rates and error ratios the alerts and boards read.
func recordingRules(opt Options) RuleGroup {
	w5 := opt.dur(5 * time.Minute)
	rec := RuleGroup{Name: "dbcanary-recording"}
	for _, q := range Quantiles {
		// Every attempt counts, failed ones too: a timed-out op is at least
		// as slow as its timeout and must not drop out of the p99.
		add(&rec, Rule{Record: RecLatencyQuantile, Labels: map[string]string{"quantile": qs(q)},
			Expr: fmt.Sprintf(`histogram_quantile(%s, sum by (target, backend, op, le) (rate(dbcanary_op_latency_seconds_bucket[%s])))`, qs(q), w5)})
	}
	for _, q := range Quantiles {
		add(&rec, Rule{Record: RecPhaseQuantile, Labels: map[string]string{"quantile": qs(q)},
			Expr: fmt.Sprintf(`histogram_quantile(%s, sum by (target, backend, op, phase, le) (rate(dbcanary_op_phase_seconds_bucket[%s])))`, qs(q), w5)})
	}
	add(&rec, Rule{Record: RecLatencyQuantile1h, Labels: map[string]string{"quantile": "0.99"},
		Expr: fmt.Sprintf(`histogram_quantile(0.99, sum by (target, backend, op, le) (rate(dbcanary_op_latency_seconds_bucket[%s])))`, opt.dur(time.Hour))})
	add(&rec, Rule{Record: RecOpsRate, Expr: fmt.Sprintf(`sum by (target, backend, op, result) (rate(dbcanary_op_latency_seconds_count[%s]))`, w5)})
	add(&rec, Rule{Record: RecFailuresRate, Expr: fmt.Sprintf(`sum by (target, backend, op, cause) (rate(dbcanary_op_failures_total[%s]))`, w5)})
	add(&rec, Rule{Record: RecBytesRate, Expr: fmt.Sprintf(`sum by (target, backend, op, direction) (rate(dbcanary_op_bytes_total[%s]))`, w5)})
	// Failures over attempts: a lost message is a failure without a latency
	// sample, so the denominator is successes + failures, not the sample count.
	ratio := func(by, w string) string {
		return fmt.Sprintf(`sum by (%[1]s) (rate(dbcanary_op_failures_total[%[2]s])) / (sum by (%[1]s) (rate(dbcanary_op_latency_seconds_count{result="ok"}[%[2]s])) + sum by (%[1]s) (rate(dbcanary_op_failures_total[%[2]s])))`, by, w)
	}
	add(&rec, Rule{Record: RecOpErrorRatio, Expr: ratio("target, backend, op", w5)})
	// The budget is the availability SLO's: a read that found other bytes,
	// a lost message or a stale read happened while the store answered, and
	// pages as DataIntegrity/DurabilityLoss instead.
	// Error-budget windows divide failures by the attempts the config
	// expects over the whole window (dbcanary_op_expected_rate), not by the
	// attempts seen: a daemon started 5 minutes ago does not turn 10 s of
	// errors into a 3 % ratio over "1h", and lost messages (failures without
	// an attempt of their own) are still counted against the budget.
	for _, w := range burnWindows {
		ws := opt.dur(w)
		add(&rec, Rule{Record: RecTargetErrorRatio + windowName(w), Expr: fmt.Sprintf(
			`sum by (target, backend) (increase(dbcanary_op_failures_total{cause!~"%[3]s"}[%[1]s])) / (sum by (target, backend) (avg_over_time(dbcanary_op_expected_rate[%[1]s])) * %[2]s)`,
			ws, secs(opt, w), notAvailability)})
	}
	return rec
}

// baselineRules are the baseline's latency figures as series, so boards can
// draw and divide by them.
func baselineRules(b *baseline.File) RuleGroup {
	base := RuleGroup{Name: "dbcanary-baselines"}
	for _, f := range b.Figures {
		q, isQ := f.Quantile()
		if !isQ || (f.Kind != baseline.KindLatency && f.Kind != baseline.KindPhase) {
			continue
		}
		for _, op := range f.Ops {
			l := map[string]string{"backend": f.Backend, "op": op, "quantile": qs(q), "figure": f.ID, "use": f.Use}
			name := RecLatencyBaseline
			if f.Kind == baseline.KindPhase {
				l["phase"] = f.Phase
				name = RecPhaseBaseline
			}
			if len(f.Targets) == 0 {
				add(&base, Rule{Record: name, Expr: fmt.Sprintf("vector(%s)", qs(f.Seconds())), Labels: l})
			}
			// A target's own figure is a series of its own name: the boards
			// join the backend-wide ones on (backend, op, quantile).
			for _, tg := range f.Targets {
				lt := maps.Clone(l)
				lt["target"] = tg
				add(&base, Rule{Record: "target_" + name, Expr: fmt.Sprintf("vector(%s)", qs(f.Seconds())), Labels: lt})
			}
		}
	}
	return base
}

// exporterAlerts: dbcanary itself not scraped, down, its config reload
// failed, or its ledger not saved.
func exporterAlerts(p baseline.Policy, opt Options) []Rule {
	al := RuleGroup{}
	add(&al, opt.alert(AlertExporterAbsent, fmt.Sprintf(`absent(up{job="%s"})`, p.Job), 5*time.Minute, "critical",
		"No dbcanary scrape target exists",
		fmt.Sprintf(`Prometheus has no target in job "%s" (value {{ $value }}): dbcanary is not being scraped, so none of its alerts can fire.`, p.Job)))
	add(&al, opt.alert(AlertExporterDown, fmt.Sprintf(`up{job="%s"} == 0`, p.Job), 2*time.Minute, "critical",
		"dbcanary {{ $labels.instance }} cannot be scraped",
		"Scraping {{ $labels.instance }} fails (up = {{ $value }}): the canary is down or unreachable, so its targets are unwatched."))
	add(&al, opt.alert(AlertConfigReloadFailed, `dbcanary_config_last_reload_successful == 0`, 5*time.Minute, "warning",
		"dbcanary {{ $labels.instance }} failed to reload its config",
		"The last config reload failed (value {{ $value }}; baseline: 1 = success); the previous config keeps running."))
	// dbcanary's own state, not the store's: a ticket, never a page.
	add(&al, opt.alert(AlertLedgerNotSaved, `dbcanary_ledger_last_save_successful == 0`, 5*time.Minute, "warning",
		"dbcanary cannot save the durability ledger of {{ $labels.target }}",
		"The ledger's last write of its file in state_dir failed (value {{ $value }}; baseline: 1): the disk is full or not writable. Its writes are still checked while this process runs; a restart would forget those not saved (unchecked, never reported lost)."))
	al.Rules[len(al.Rules)-1].Comment = "pint disable promql/series(dbcanary_ledger_last_save_successful)" // exported only with state_dir
	return al.Rules
}

// targetAlerts: a target down or misconfigured, and its store's nodes down.
func targetAlerts(opt Options) []Rule {
	al := RuleGroup{}
	// A misconfigured target pages as such, not also as down.
	add(&al, opt.alert(AlertTargetDown, `dbcanary_target_up == 0 unless dbcanary_target_misconfigured == 1`, 2*time.Minute, "critical",
		"{{ $labels.backend }} target {{ $labels.target }} is down",
		"dbcanary cannot reach {{ $labels.target }} (dbcanary_target_up = {{ $value }}; baseline: 1): the latest run of at least one op failed with timeout, refused, DNS, TLS or server errors. The status page (/) shows which op and the error."))
	// A node the driver sees down while the target serves through the
	// others: a ticket (the next node lost may stop the target), never a
	// page; a target that is down pages as such instead.
	add(&al, opt.alert(AlertStoreNodeDown, `dbcanary_store_node_up == 0 and ignoring (node) dbcanary_target_up == 1`, 5*time.Minute, "warning",
		"{{ $labels.backend }} node {{ $labels.node }} of target {{ $labels.target }} is down",
		"The driver of {{ $labels.target }} sees node {{ $labels.node }} down (dbcanary_store_node_up = {{ $value }}; baseline: 1) while the target still serves through the other nodes: one more node lost may stop it. Check the node's process and its logs; the status page (/) shows the target's ops."))
	// The gauge exists only for targets whose driver knows the store's nodes.
	al.Rules[len(al.Rules)-1].Comment = "pint disable promql/series(dbcanary_store_node_up)"
	// More than half the nodes a target knows down while it still serves:
	// the store lost its quorum (an OpenSearch cluster without a cluster
	// manager blocks only metadata writes, and a lone node holding the
	// canary's primary goes on serving it: docs/clusters.md). A page; a
	// target that is down pages DbcanaryTargetDown instead.
	add(&al, opt.alert(AlertStoreMajorityDown, `count without (node) (dbcanary_store_node_up == 0) > count without (node) (dbcanary_store_node_up) / 2 unless ignoring (node) dbcanary_target_up == 0`, 2*time.Minute, "critical",
		"{{ $labels.backend }} target {{ $labels.target }}: most of its store's nodes are down",
		"{{ $value }} of the nodes {{ $labels.target }} knows are down (dbcanary_store_node_up; baseline: none) while the canary is still served: the store has lost its quorum (an OpenSearch cluster without a cluster manager, a Cassandra ring whose QUORUM cannot be met for some keys, a RabbitMQ cluster without a majority). The next write that needs a quorum, an index creation or a mapping change fails. The status page (/) names the nodes; DbcanaryStoreNodeDown names each."))
	al.Rules[len(al.Rules)-1].Comment = "pint disable promql/series(dbcanary_store_node_up)"
	add(&al, opt.alert(AlertTargetMisconfigured, `dbcanary_target_misconfigured == 1`, 2*time.Minute, "critical",
		"{{ $labels.backend }} target {{ $labels.target }} is misconfigured: credentials or permissions",
		"dbcanary reaches {{ $labels.target }} but cannot use it (dbcanary_target_misconfigured = {{ $value }}; baseline: 0): credentials rejected (cause auth) or a missing bucket, index, keyspace, grant or permission (cause setup). This is a setup problem, not data loss: the status page (/) and the logs name what is missing."))
	return al.Rules
}

// opAlerts: an op stale, failing often, losing or corrupting data, or backlogged.
func opAlerts(p baseline.Policy, opt Options) []Rule {
	w5 := opt.dur(5 * time.Minute)
	al := RuleGroup{}
	staleAfter := secs(opt, time.Duration(p.StaleAfter))
	// A target that pages as down or misconfigured fails every op: its
	// staleness, error ratio and backlog are the same fault and stay quiet
	// while the page fires (the error ratio also for 5 minutes after, while
	// its failures are still in the window). Firing under Alertmanager's
	// inhibition instead, a symptom whose "for:" ended at the evaluation the
	// outage did was sent as a ticket: the page's resolution reached
	// Alertmanager before the symptom's (make soak-chaos, 6 Dec 2026).
	down := fmt.Sprintf(`ALERTS{alertname=~"%s|%s",alertstate="firing"}`, AlertTargetDown, AlertTargetMisconfigured)
	add(&al, opt.alert(AlertStale, fmt.Sprintf(`(time() - dbcanary_last_success_timestamp_seconds > clamp_min(%s / dbcanary_op_expected_rate, %s)) and dbcanary_last_success_timestamp_seconds > 0 unless on (target, backend) %s`, qs(p.StaleIntervals*opt.TimeScale), staleAfter, down), 2*time.Minute, "warning",
		"{{ $labels.backend }} op {{ $labels.op }} on {{ $labels.target }} has not succeeded recently",
		fmt.Sprintf("The last success of %s was {{ $value | humanizeDuration }} ago (policy: stale after %s or %g of the op's intervals, whichever is longer).", "{{ $labels.op }}", opt.dur(time.Duration(p.StaleAfter)), p.StaleIntervals)))
	add(&al, opt.alert(AlertErrorRatioHigh, fmt.Sprintf(`%s > %s and on (target, backend, op) sum by (target, backend, op) (increase(dbcanary_op_failures_total[%s])) >= %d unless on (target, backend) max_over_time(%s[%s])`,
		RecOpErrorRatio, qs(p.ErrorRatioWarning), w5, p.ErrorMinFailures, down, w5), 5*time.Minute, "warning",
		"{{ $labels.backend }} op {{ $labels.op }} on {{ $labels.target }} fails often",
		fmt.Sprintf("{{ $value | humanizePercentage }} of %s ops failed over %s (policy: above %s and at least %d failures; the references measured 0 %% errors under load).", "{{ $labels.op }}", w5, pct(p.ErrorRatioWarning), p.ErrorMinFailures)))
	// The durability ledger's checks page as DbcanaryDurabilityLoss (with the age), not twice.
	add(&al, opt.alert(AlertDataIntegrity, fmt.Sprintf(`sum by (target, backend, op, cause) (increase(dbcanary_op_failures_total{cause=~"mismatch|lost|not_found",op!="ledger_check"}[%s])) > 0`, w5), 0, "critical",
		"Data integrity failure on {{ $labels.backend }} target {{ $labels.target }}: {{ $labels.cause }}",
		fmt.Sprintf("%s %s failure(s) of op %s in the last %s: the store answered but what the canary wrote was changed, gone or never delivered (baseline: 0).", wholeValue, "{{ $labels.cause }}", "{{ $labels.op }}", w5)))
	add(&al, opt.alert(AlertDurabilityLoss, fmt.Sprintf(`sum by (target, backend, age, result) (increase(dbcanary_ledger_checks_total{result=~"missing|corrupted"}[%s])) > 0`, w5), 0, "critical",
		"Acknowledged write {{ $labels.result }} on {{ $labels.backend }} target {{ $labels.target }} at the {{ $labels.age }} check",
		fmt.Sprintf("%s write(s) the store acknowledged were found %s when read back %s later (durability ledger, last %s; baseline: 0): the store lost or changed data it had confirmed.", wholeValue, "{{ $labels.result }}", "{{ $labels.age }}", w5)))
	add(&al, opt.alert(AlertBacklog, fmt.Sprintf(`sum by (target, backend, op) (increase(dbcanary_op_failures_total{cause="backlog"}[%s])) > 0 unless on (target, backend) %s`, w5, down), 2*time.Minute, "warning",
		"dbcanary ops on {{ $labels.target }} cannot start: in-flight bound reached",
		fmt.Sprintf("%s %s ops could not start within their timeout over %s because max_in_flight ops were still running (baseline: 0): the store stalls.", wholeValue, "{{ $labels.op }}", w5)))
	return al.Rules
}

// burnRateAlerts: the multi-window error-budget burn alerts of the availability SLO.
func burnRateAlerts(p baseline.Policy, opt Options) []Rule {
	budget := 1 - p.SLOObjective
	al := RuleGroup{}
	for _, ba := range burnAlerts {
		thr := qs(round(ba.factor * budget))
		long, short := RecTargetErrorRatio+windowName(ba.long), RecTargetErrorRatio+windowName(ba.short)
		// An outage that already paged as down or misconfigured does not page
		// again as a burn while its failures are in the short window.
		add(&al, opt.alert(AlertErrorBudgetBurn, fmt.Sprintf(`(%s > %s and %s > %s) unless on (target, backend) max_over_time(ALERTS{alertname=~"%s|%s",alertstate="firing"}[%s])`,
			long, thr, short, thr, AlertTargetDown, AlertTargetMisconfigured, opt.dur(ba.short)), ba.forDur, ba.severity,
			fmt.Sprintf("%s target {{ $labels.target }} burns its error budget %gx too fast", "{{ $labels.backend }}", ba.factor),
			fmt.Sprintf("Error ratio {{ $value | humanizePercentage }} over %s (and over %s) is above %s = %g x the %s error budget of the %s availability SLO (policy.slo_objective).",
				opt.dur(ba.long), opt.dur(ba.short), pct(round(ba.factor*budget)), ba.factor, pct(budget), pct(p.SLOObjective))))
		al.Rules[len(al.Rules)-1].Labels["window"] = windowName(ba.long)
	}
	return al.Rules
}

// driftAlert: an op's hourly p99 much slower than a day ago.
func driftAlert(p baseline.Policy, opt Options) Rule {
	return opt.alert(AlertLatencyDrift,
		fmt.Sprintf(`%[1]s > %[2]s * (%[1]s offset %[3]s) and %[1]s > %[4]s`, RecLatencyQuantile1h, qs(p.DriftFactor), opt.dur(24*time.Hour), qs(p.DriftMinSeconds)),
		30*time.Minute, "warning",
		"{{ $labels.backend }} op {{ $labels.op }} on {{ $labels.target }} is much slower than a day ago",
		fmt.Sprintf(`p99 over %s is {{ printf "%%.3f" $value }}s, more than %g x the same window %s earlier (policy.drift_factor; only above %gs).`,
			opt.dur(time.Hour), p.DriftFactor, opt.dur(24*time.Hour), p.DriftMinSeconds))
}

// byTarget is every grouping of the rules that starts with the target label:
// the per-target aggregations and the joins between them.
var byTarget = regexp.MustCompile(`\b(by|on) \((target(?:, [a-z_]+)*)\)`)

// keepLabels adds policy.aggregate_by (e.g. cluster) to every per-target
// grouping, so a rule evaluated over several clusters or vantage points (a
// global Prometheus, Thanos Ruler) keeps them apart instead of summing them.
// Joins with the baseline series (on backend, op, ...) are left alone: those
// series are the same everywhere.
func keepLabels(expr string, extra []string) string {
	if len(extra) == 0 {
		return expr
	}
	return byTarget.ReplaceAllString(expr, "$1 ($2, "+strings.Join(extra, ", ")+")")
}

// LeMatch selects one classic bucket whatever spelling of its bound the
// server stored: client_golang's text format writes Go's shortest form
// ("12"), while OpenMetrics scrapes and Prometheus 3 (which normalises le on
// ingestion) store the float form ("12.0"). Fractional bounds read the same
// in both.
func LeMatch(v float64) string {
	if math.IsInf(v, 1) {
		return `le="+Inf"`
	}
	short := strconv.FormatFloat(v, 'g', -1, 64)
	if strings.ContainsAny(short, ".e") {
		return fmt.Sprintf(`le="%s"`, short)
	}
	return fmt.Sprintf(`le=~"%s(\\.0)?"`, short)
}

// RecentWindow is the shortest range in the rules. Prometheus 3's ranges are
// left-open ((t-w, t]): at the longest scrape interval the rules are made for
// (1m; docs/alerts-dashboards.md) a 1m range holds one sample, so increase()
// over it is empty and an alert needing it never fires. Three intervals hold
// at least two samples even while the latest scrape is still being ingested.
const RecentWindow = 3 * time.Minute

// latencyRule compares one recorded quantile with one threshold. The
// threshold sits on a bucket bound, so the samples above it in the window are
// counted exactly: at least minSlow are required, one of them in the last
// RecentWindow, and a target that paged as down or misconfigured in the
// window does not page as slow too.
func latencyRule(t Threshold, minSlow int, opt Options) Rule {
	w5 := opt.dur(5 * time.Minute)
	tm := t.targetMatcher()
	sel := fmt.Sprintf(`%s{backend="%s",op="%s"%s,quantile="%s"}`, RecLatencyQuantile, t.Backend, t.Op, tm, qs(t.Quantile))
	hist, hsel := "dbcanary_op_latency_seconds_bucket", fmt.Sprintf(`backend="%s",op="%s"%s`, t.Backend, t.Op, tm)
	what := t.Op
	if t.Phase != "" {
		sel = fmt.Sprintf(`%s{backend="%s",op="%s"%s,phase="%s",quantile="%s"}`, RecPhaseQuantile, t.Backend, t.Op, tm, t.Phase, qs(t.Quantile))
		hist, hsel = "dbcanary_op_phase_seconds_bucket", hsel+fmt.Sprintf(`,phase="%s"`, t.Phase)
		what = t.Op + " " + t.Phase
	}
	slowIn := func(w string) string {
		return fmt.Sprintf(`sum by (target, backend, op) (increase(%[1]s{%[2]s,le="+Inf"}[%[4]s])) - sum by (target, backend, op) (increase(%[1]s{%[2]s,%[3]s}[%[4]s]))`,
			hist, hsel, LeMatch(t.Bound), w)
	}
	forDur := 10 * time.Minute
	if t.Severity == "critical" {
		forDur = 5 * time.Minute
	}
	stat := "p" + strings.TrimPrefix(qs(t.Quantile*100), "0")
	// op (and phase) repeat the series' own labels so rules sharing a figure stay distinct.
	labels := map[string]string{"severity": t.Severity, "figure": t.Figure.ID, "op": t.Op}
	if t.Phase != "" {
		labels["phase"] = t.Phase
	}
	return Rule{
		Alert: AlertLatencyAboveBaseline,
		// ...and still slow in the last RecentWindow: a burst ends the
		// pending state within 3 minutes of its end, so only slowness that
		// lasts the whole for: pages, not a burst the 5m window remembers.
		// An outage that paged as down or misconfigured does not page again
		// as slow (its timed-out ops are slow samples); one timeout that makes
		// target_up blink does not reset a real latency alert either.
		Expr: fmt.Sprintf(`%s > %s and on (target, backend, op) (%s) >= %d and on (target, backend, op) (%s) > 0 unless on (target, backend) max_over_time(ALERTS{alertname=~"%s|%s",alertstate="firing"}[%s])`,
			sel, qs(t.Bound), slowIn(w5), minSlow, slowIn(opt.dur(RecentWindow)), AlertTargetDown, AlertTargetMisconfigured, w5),
		For:    opt.forOf(AlertLatencyAboveBaseline, t.Severity, forDur),
		Labels: labels,
		Annotations: map[string]string{
			"summary": fmt.Sprintf("%s %s %s on {{ $labels.target }} is above %gx its baseline", t.Figure.Backend, what, stat, t.Factor),
			"description": fmt.Sprintf(`%s %s over %s is {{ printf "%%.3f" $value }}s, above the threshold %gs = %g x baseline %s %s (%gs, snapped to a bucket bound), with at least %d samples above it. Source: %s, %s; quoted "%s".`,
				what, stat, w5, t.Bound, t.Factor, stat, fmtFigure(t.Figure), round(t.Raw), minSlow, t.Source.Document, t.Figure.Conditions, t.Figure.Quoted),
			"runbook_url": opt.runbook(AlertLatencyAboveBaseline),
		},
	}
}

func fmtFigure(f baseline.Figure) string {
	return strconv.FormatFloat(f.Value, 'f', -1, 64) + " " + f.Unit
}

// secs formats a scaled duration as seconds for PromQL arithmetic.
func secs(opt Options, d time.Duration) string {
	s := time.Duration(float64(d) * opt.TimeScale).Round(time.Second)
	if s < time.Second {
		s = time.Second
	}
	return strconv.FormatInt(int64(s/time.Second), 10)
}

// round drops float noise (14.4 × 0.001 = 0.014400000000000001).
func round(v float64) float64 { return math.Round(v*1e9) / 1e9 }

func pct(v float64) string { return strconv.FormatFloat(round(v*100), 'f', -1, 64) + " %" }

// Marshal renders a rule file with a header naming its source.
func (f *RuleFile) Marshal(opt Options) ([]byte, error) {
	opt = opt.withDefaults()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Generated by `dbcanary generate rules --baseline %s`. DO NOT EDIT:\n# change the baseline file (or the generator) and regenerate. See docs/alerts-dashboards.md.\n", opt.BaselineName)
	if opt.TimeScale != 1 {
		fmt.Fprintf(&buf, "# TEST COPY: every for:, window and offset scaled by %g.\n", opt.TimeScale)
	}
	return appendYAML(&buf, f.node())
}

// appendYAML encodes v (two-space indent) after the header already in buf.
func appendYAML(buf *bytes.Buffer, v any) ([]byte, error) {
	enc := yaml.NewEncoder(buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
