package history

import "time"

// The timings the run's graces are derived from: the chart's ServiceMonitor
// interval, alerts/dbcanary-rules.yml's windows and alerts/alertmanager.yml's
// group_interval (TestRunOptionsGroupInterval keeps the last in step).
const (
	// ScrapeEvery is the scrape and rule evaluation interval of the run.
	ScrapeEvery = 30 * time.Second
	// RuleWindow is the longest range a page's expression looks back over
	// (the latency quantiles' and error ratios' rate5m, max_over_time 5m):
	// a symptom stays in it that long after the fault ends.
	RuleWindow = 5 * time.Minute
	// GroupInterval is the shipped routes' group_interval: Alertmanager
	// sends a group's resolution at its next tick, up to that long later.
	GroupInterval = 5 * time.Minute
)

// RunOptions are the checker's stated tolerances for a make soak-chaos run
// of length run whose store configured to lose is lossy.
//
//   - PageGrace 2m: a page up to 2 minutes after a revert is still the
//     fault's (the store's recovery, group_wait 30s).
//   - NotifyGrace: a resolution comes once the symptom has left the rules'
//     window (RuleWindow), at the next evaluation and scrape, then at the
//     group's next tick (GroupInterval): up to 11 minutes after the revert.
//     (7 minutes until 6 Dec 2026: the 2-hour run with SEED=1 had two
//     LatencyAboveBaseline resolutions 7m06s and 7m20s after their reverts.)
//   - TicketGrace 14m: the warnings' longest for: (10m), their last-3m-sample
//     clause and group_wait after a symptom that outlasts the fault.
//   - Growth: RSS 10 % or 16 MiB, goroutines 10 % or 20, open files 10 % or
//     10, series (those failures create on first use apart) 5 % or 100,
//     over the longest process life past a 3-minute warm-up, judged when it
//     spans at least min(30m, run/4).
func RunOptions(run time.Duration, lossy ...string) Options {
	span := min(30*time.Minute, run/4)
	b := func(m string, rel, abs float64) GrowthBound {
		return GrowthBound{Metric: m, Rel: rel, Abs: abs, Warmup: 3 * time.Minute, MinSpan: span}
	}
	return Options{
		PageGrace:   2 * time.Minute,
		NotifyGrace: RuleWindow + 2*ScrapeEvery + GroupInterval,
		TicketGrace: 14 * time.Minute,
		Lossy:       lossy,
		Growth: []GrowthBound{
			b(MetricRSS, 0.10, 16<<20), b(MetricGoroutines, 0.10, 20),
			b(MetricOpenFDs, 0.10, 10), b(MetricSeries, 0.05, 100)},
	}
}
