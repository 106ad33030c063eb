package probes

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newLedgerChecks is a store's dbcanary_ledger_checks_total.
func newLedgerChecks() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "dbcanary", Name: "ledger_checks_total",
		Help: "Acknowledged writes read back by the durability ledger, by age at the check (1m, 10m, 1h) and result (intact, missing, corrupted).",
	}, []string{"target", "backend", "age", "result"})
}

var (
	ledgerEntriesDesc = prometheus.NewDesc("dbcanary_ledger_entries",
		"Acknowledged writes the durability ledger holds, still to be read back.", []string{"target", "backend"}, nil)
	ledgerOldestDesc = prometheus.NewDesc("dbcanary_ledger_oldest_entry_age_seconds",
		"Age of the oldest acknowledged write the durability ledger holds (0 when empty).", []string{"target", "backend"}, nil)
	ledgerSavedDesc = prometheus.NewDesc("dbcanary_ledger_last_save_successful",
		"Whether the durability ledger's last write of its file in state_dir succeeded (1) or failed (0: disk full, permissions); its entries are still checked while this process runs, but a restart forgets those not saved. Only for ledgers with a state_dir.", []string{"target", "backend"}, nil)
)

// ledgerCounters are a ledger's pre-resolved check series.
type ledgerCounters struct {
	checks          *prometheus.CounterVec
	target, backend string
	byAge           map[string]map[LedgerResult]prometheus.Counter
}

// counters creates the ledger's series at zero, so an alert on an increase
// sees the first loss.
func (s *LedgerStore) counters(l *Ledger) *ledgerCounters {
	c := &ledgerCounters{checks: s.checks, target: l.target, backend: l.backend, byAge: map[string]map[LedgerResult]prometheus.Counter{}}
	for _, a := range l.ages {
		c.resolve(AgeLabel(a))
	}
	return c
}

func (c *ledgerCounters) resolve(age string) map[LedgerResult]prometheus.Counter {
	m, ok := c.byAge[age]
	if !ok {
		m = map[LedgerResult]prometheus.Counter{}
		for _, r := range LedgerResults {
			m[r] = c.checks.WithLabelValues(c.target, c.backend, age, string(r))
		}
		c.byAge[age] = m
	}
	return m
}

func (c *ledgerCounters) count(age time.Duration, r LedgerResult) { c.resolve(AgeLabel(age))[r].Inc() }

// Describe implements prometheus.Collector: dbcanary_ledger_checks_total
// and, per open ledger, dbcanary_ledger_entries,
// dbcanary_ledger_oldest_entry_age_seconds and (with a file)
// dbcanary_ledger_last_save_successful.
func (s *LedgerStore) Describe(ch chan<- *prometheus.Desc) {
	s.checks.Describe(ch)
	ch <- ledgerEntriesDesc
	ch <- ledgerOldestDesc
	ch <- ledgerSavedDesc
}

// Collect implements prometheus.Collector.
func (s *LedgerStore) Collect(ch chan<- prometheus.Metric) {
	s.checks.Collect(ch)
	now := time.Now()
	seen := map[[2]string]bool{}
	for _, l := range s.ledgers() {
		k := [2]string{l.target, l.backend}
		if seen[k] {
			continue // two ledgers of one target (a state_dir change on reload): one series
		}
		seen[k] = true
		n, oldest := l.Stats(now)
		ch <- prometheus.MustNewConstMetric(ledgerEntriesDesc, prometheus.GaugeValue, float64(n), l.target, l.backend)
		ch <- prometheus.MustNewConstMetric(ledgerOldestDesc, prometheus.GaugeValue, oldest.Seconds(), l.target, l.backend)
		if l.path != "" {
			ok := 1.0
			if l.saveFailed.Load() {
				ok = 0
			}
			ch <- prometheus.MustNewConstMetric(ledgerSavedDesc, prometheus.GaugeValue, ok, l.target, l.backend)
		}
	}
}

// CheckCounts reads dbcanary_ledger_checks_total of one target from this
// store, keyed by result ("missing") and by age and result ("10m/missing"),
// for tests and bench reports that need the ledger's figures.
func (s *LedgerStore) CheckCounts(target string) (map[string]float64, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "dbcanary_ledger_checks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["target"] == target {
				out[l["result"]] += m.GetCounter().GetValue()
				out[l["age"]+"/"+l["result"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}
