package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/internal/baseline"
	"github.com/dbcanary/dbcanary/internal/hist"
)

// Driver is one driver's row in a merged report: who it was and what each
// of its stages did.
type Driver struct {
	Shard     int           `json:"shard"`
	Source    string        `json:"source"`
	Host      string        `json:"host"`
	Instance  string        `json:"instance"`
	Namespace string        `json:"namespace,omitempty"`
	Version   string        `json:"version"`
	Started   time.Time     `json:"started"`
	Finished  time.Time     `json:"finished"`
	Failed    uint64        `json:"failed"`
	Stages    []DriverStage `json:"stages"`
}

// DriverStage is one stage of one driver, over its own window.
type DriverStage struct {
	Name        string       `json:"name"`
	Group       string       `json:"group,omitempty"`
	Started     time.Time    `json:"started"`
	Ended       time.Time    `json:"ended"`
	Seconds     float64      `json:"seconds"`
	Count       uint64       `json:"count"`
	Failed      uint64       `json:"failed"`
	Throughput  float64      `json:"throughput_ops_per_s"`
	Overall     Summary      `json:"overall_latency_ms"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
}

// ReadReport reads a JSON report (`dbcanary bench --json`); name says
// where it came from in errors.
func ReadReport(r io.Reader, name string) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("%s: not a bench JSON report: %w", name, err)
	}
	if rep.Profile == "" || len(rep.Stages) == 0 {
		return nil, fmt.Errorf("%s: not a bench JSON report (no profile or no stages)", name)
	}
	return &rep, nil
}

// Merge adds the reports of the N drivers of one sharded run (`dbcanary bench
// --shard i/N`) into one report: counts and histograms bucket by bucket (so
// every percentile is the one of all the drivers' samples together), rates
// summed (each driver's over its own measured window), and each driver's own
// row kept. names label the reports in errors and driver rows. It refuses
// reports of different profiles, targets, parameters or stage shapes, a
// missing or repeated driver, and stages whose windows do not overlap.
func Merge(reports []*Report, names []string, base *baseline.File) (*Report, error) {
	if len(reports) == 0 {
		return nil, errors.New("no report to merge")
	}
	if err := checkDrivers(reports, names); err != nil {
		return nil, err
	}
	for i, r := range reports[1:] {
		if err := sameShape(reports[0], r, names[0], names[i+1]); err != nil {
			return nil, err
		}
	}
	first := reports[0]
	m := &Report{Profile: first.Profile, Description: first.Description, Target: first.Target, Backend: first.Backend,
		Version: first.Version, Host: fmt.Sprintf("%d drivers", len(reports)), Started: first.Started, Finished: first.Finished,
		Params: first.Params, Verified: first.Verified, Namespace: "one per driver (see the drivers table)", Reproduces: first.Reproduces}
	for i, r := range reports {
		m.Started, m.Finished = minTime(m.Started, r.Started), maxTime(m.Finished, r.Finished)
		m.Failed += r.Failed
		m.PeakRSSBytes = max(m.PeakRSSBytes, r.PeakRSSBytes)
		m.Drivers = append(m.Drivers, driverOf(r, names[i]))
	}
	m.Notes = mergeNotes(reports)
	for _, r := range reports[1:] {
		if r.Version != first.Version {
			m.Notes = append(m.Notes, fmt.Sprintf("the drivers ran different dbcanary versions (%s and %s): see the drivers table", first.Version, r.Version))
			break
		}
	}
	slices.SortFunc(m.Drivers, func(a, b Driver) int { return a.Shard - b.Shard })
	for si := range first.Stages {
		st, note, err := mergeStage(reports, names, si)
		if err != nil {
			return nil, err
		}
		m.Stages = append(m.Stages, st)
		m.Notes = append(m.Notes, note)
	}
	if err := mergedTables(m, base); err != nil {
		return nil, err
	}
	return m, nil
}

// mergeNotes keeps a note every driver has once, and prefixes the others
// with their driver.
func mergeNotes(reports []*Report) []string {
	count := map[string]int{}
	for _, r := range reports {
		for _, n := range slices.Compact(slices.Clone(r.Notes)) {
			count[n]++
		}
	}
	var out []string
	for _, r := range reports {
		for _, n := range r.Notes {
			switch {
			case count[n] < len(reports):
				out = append(out, fmt.Sprintf("driver %d: %s", r.Shard.Index, n))
			case !slices.Contains(out, n):
				out = append(out, n)
			}
		}
	}
	return out
}

// checkDrivers wants every report to be one driver of the same N drivers,
// each present once.
func checkDrivers(reports []*Report, names []string) error {
	seen := map[int]string{}
	n := 0
	for i, r := range reports {
		switch {
		case r.Shard == nil:
			return fmt.Errorf("%s: not a driver's report (run each driver with --shard i/N and --start-at)", names[i])
		case len(r.Drivers) > 0:
			return fmt.Errorf("%s: already a merged report", names[i])
		case n != 0 && r.Shard.Count != n:
			return fmt.Errorf("%s: driver %s of %d drivers, %s: of %d", names[i], r.Shard, r.Shard.Count, names[0], n)
		case seen[r.Shard.Index] != "":
			return fmt.Errorf("%s and %s: both are driver %s", seen[r.Shard.Index], names[i], r.Shard)
		}
		n = r.Shard.Count
		seen[r.Shard.Index] = names[i]
	}
	if len(reports) != n {
		var missing []string
		for i := range n {
			if seen[i] == "" {
				missing = append(missing, strconv.Itoa(i))
			}
		}
		return fmt.Errorf("the run had %d drivers, %d reports given: driver(s) %s missing", n, len(reports), strings.Join(missing, ", "))
	}
	return nil
}

// sameShape refuses to merge reports of different runs.
func sameShape(a, b *Report, an, bn string) error {
	field := func(what, x, y string) error {
		return fmt.Errorf("%s and %s: different %s (%q, %q): reports of one run only", an, bn, what, x, y)
	}
	switch {
	case a.Profile != b.Profile:
		return field("profiles", a.Profile, b.Profile)
	case a.Backend != b.Backend || a.Target != b.Target:
		return field("targets", a.Target+" ("+a.Backend+")", b.Target+" ("+b.Backend+")")
	case !slices.Equal(a.Params, b.Params):
		return field("parameters", paramString(a.Params), paramString(b.Params))
	case !a.Shard.StartAt.Equal(b.Shard.StartAt):
		return field("start times (--start-at)", a.Shard.StartAt.UTC().Format(time.RFC3339Nano), b.Shard.StartAt.UTC().Format(time.RFC3339Nano))
	case len(a.Stages) != len(b.Stages):
		return field("stage counts", strconv.Itoa(len(a.Stages)), strconv.Itoa(len(b.Stages)))
	}
	for i := range a.Stages {
		x, y := &a.Stages[i], &b.Stages[i]
		if x.Name != y.Name || x.Group != y.Group || x.Setup != y.Setup || x.Mode != y.Mode || x.Workers != y.Workers || x.Rate != y.Rate {
			return field(fmt.Sprintf("stage %d", i+1), x.Name+": "+x.Mode, y.Name+": "+y.Mode)
		}
		if x.Step != y.Step {
			return field("plot steps of stage "+x.Name, num(x.Step), num(y.Step))
		}
	}
	return nil
}

func paramString(ps []Param) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name+"="+p.Value)
	}
	return strings.Join(s, " ")
}

// mergeStage merges stage si of every report; note says its common window.
func mergeStage(reports []*Report, names []string, si int) (StageReport, string, error) {
	first := reports[0].Stages[si]
	st := StageReport{Name: first.Name, Group: first.Group, Setup: first.Setup, Mode: first.Mode, Workers: first.Workers,
		Rate: first.Rate, Step: first.Step, Started: first.Started, Ended: first.Ended}
	overall := hist.New(first.OverallHist.Bits)
	var conc []*Concurrency
	longest := 0.0
	ops := map[string][]opPart{}
	for i, r := range reports {
		s := &r.Stages[si]
		st.Started, st.Ended = maxTime(st.Started, s.Started), minTime(st.Ended, s.Ended)
		longest = max(longest, s.Seconds)
		st.Issued += s.Issued
		st.Throughput += s.Throughput
		conc = append(conc, s.Concurrency)
		if err := addSnapshot(overall, s.OverallHist, names[i], s.Name+" overall latency"); err != nil {
			return st, "", err
		}
		for j := range s.Ops {
			ops[s.Ops[j].Op] = append(ops[s.Ops[j].Op], opPart{&s.Ops[j], names[i]})
		}
	}
	if !st.Ended.After(st.Started) && !first.Setup {
		return st, "", fmt.Errorf("stage %s: the drivers' windows do not overlap (%s): start them with the same --start-at", first.Name, windows(reports, si))
	}
	st.Seconds = max(st.Ended.Sub(st.Started).Seconds(), 0)
	st.Overall, st.OverallHist = summarize(overall), overall.Snapshot()
	st.Concurrency = sumConcurrency(conc)
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		o, err := mergeOp(ops[name], first.Name)
		if err != nil {
			return st, "", err
		}
		st.Ops = append(st.Ops, o)
	}
	note := fmt.Sprintf("stage %s: the drivers ran together for %.3f s (%.2f %% of the longest driver's %.3f s); rates are the sum of the drivers' own", first.Name, st.Seconds, 100*st.Seconds/max(longest, 1e-9), longest)
	if st.Seconds == 0 {
		note = fmt.Sprintf("stage %s (setup, not compared): the drivers' windows did not overlap (%s); rates are the sum of the drivers' own", first.Name, windows(reports, si))
	}
	return st, note, nil
}

func windows(reports []*Report, si int) string {
	var w []string
	for _, r := range reports {
		s := r.Stages[si]
		w = append(w, fmt.Sprintf("driver %d %s..%s", r.Shard.Index, s.Started.UTC().Format("15:04:05.000"), s.Ended.UTC().Format("15:04:05.000")))
	}
	return strings.Join(w, ", ")
}

// opPart is one driver's figures of an op, and its report's name.
type opPart struct {
	op   *OpReport
	name string
}

// mergeOp adds the drivers' figures of one op of stage.
func mergeOp(parts []opPart, stage string) (OpReport, error) {
	first := parts[0].op
	lat, svc := hist.New(first.Histograms.Latency.Bits), hist.New(first.Histograms.Service.Bits)
	o := OpReport{Op: first.Op}
	phases := map[string]*hist.Histogram{}
	var conc []*Concurrency
	var series []seriesPart
	for _, p := range parts {
		x, what := p.op, stage+"/"+p.op.Op
		if x.Histograms.Latency.Bits == 0 {
			return o, fmt.Errorf("%s: %s has no raw histograms (written by an older dbcanary): run every driver with this version", p.name, what)
		}
		if x.Histograms.Latency.Count != x.Count {
			return o, fmt.Errorf("%s: %s: the latency histogram holds %d ops, the report counts %d", p.name, what, x.Histograms.Latency.Count, x.Count)
		}
		o.Count, o.OK, o.Failed = o.Count+x.Count, o.OK+x.OK, o.Failed+x.Failed
		o.BytesSent, o.BytesReceived = o.BytesSent+x.BytesSent, o.BytesReceived+x.BytesReceived
		o.Throughput += x.Throughput
		o.MiBps += x.MiBps
		for c, n := range x.Causes {
			if o.Causes == nil {
				o.Causes = map[string]uint64{}
			}
			o.Causes[c] += n
		}
		err := errors.Join(addSnapshot(lat, x.Histograms.Latency, p.name, what+" latency"), addSnapshot(svc, x.Histograms.Service, p.name, what+" service time"))
		for ph, snap := range x.Histograms.Phases {
			if phases[ph] == nil {
				phases[ph] = hist.New(snap.Bits)
			}
			err = errors.Join(err, addSnapshot(phases[ph], snap, p.name, what+" phase "+ph))
		}
		if err != nil {
			return o, err
		}
		conc = append(conc, x.Concurrency)
		series = append(series, seriesPart{x.Series, p.name})
	}
	if o.Count > 0 {
		o.ErrorRate = float64(o.Failed) / float64(o.Count)
	}
	o.Latency, o.Service = summarize(lat), summarize(svc)
	o.Histograms = OpHistograms{Latency: lat.Snapshot(), Service: svc.Snapshot()}
	for ph, h := range phases {
		if o.Phases == nil {
			o.Phases, o.Histograms.Phases = map[string]Summary{}, map[string]hist.Snapshot{}
		}
		o.Phases[ph], o.Histograms.Phases[ph] = summarize(h), h.Snapshot()
	}
	o.Concurrency = sumConcurrency(conc)
	var err error
	o.Series, err = mergeSeries(series, stage+"/"+o.Op)
	return o, err
}

// seriesPart is one driver's plot series of an op.
type seriesPart struct {
	points []Point
	name   string
}

// mergeSeries adds the drivers' plot intervals one by one: interval k of
// each driver covers the same seconds of the common schedule (they started
// together), so its ops and latency buckets add up.
func mergeSeries(parts []seriesPart, what string) ([]Point, error) {
	var out []Point
	var hs []*hist.Histogram
	for _, p := range parts {
		for k, pt := range p.points {
			if pt.Latency == nil {
				return nil, fmt.Errorf("%s: %s: plot interval %d has no raw histogram", p.name, what, k+1)
			}
			for len(out) <= k {
				out = append(out, Point{T: pt.T})
				hs = append(hs, hist.New(pt.Latency.Bits))
			}
			out[k].OK += pt.OK
			out[k].Failed += pt.Failed
			if err := addSnapshot(hs[k], *pt.Latency, p.name, fmt.Sprintf("%s plot interval %d", what, k+1)); err != nil {
				return nil, err
			}
		}
	}
	for k := range out {
		step := out[k].T
		if k > 0 {
			step -= out[k-1].T
		}
		out[k] = pointOf(out[k].T, step, out[k].OK, out[k].Failed, hs[k])
	}
	return out, nil
}

// addSnapshot merges a report's raw histogram into h.
func addSnapshot(h *hist.Histogram, s hist.Snapshot, name, what string) error {
	x, err := hist.FromSnapshot(s)
	if err == nil {
		err = h.Merge(x)
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, what, err)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// driverOf is a driver's own row.
func driverOf(r *Report, name string) Driver {
	d := Driver{Shard: r.Shard.Index, Source: name, Host: r.Host, Instance: r.Instance, Namespace: r.Namespace, Version: r.Version,
		Started: r.Started, Finished: r.Finished, Failed: r.Failed}
	for _, s := range r.Stages {
		ds := DriverStage{Name: s.Name, Group: s.Group, Started: s.Started, Ended: s.Ended, Seconds: s.Seconds, Throughput: s.Throughput,
			Overall: s.Overall, Concurrency: s.Concurrency}
		for _, o := range s.Ops {
			ds.Count, ds.Failed = ds.Count+o.Count, ds.Failed+o.Failed
		}
		d.Stages = append(d.Stages, ds)
	}
	return d
}

// mergedTables lays out the merged report's tables as the profile's run
// does, then the drivers' rows.
func mergedTables(m *Report, base *baseline.File) error {
	prof, ok := ProfileByName(m.Profile)
	if !ok {
		return fmt.Errorf("profile %s: not one of this dbcanary's (%s): merge with the version that ran it", m.Profile, m.Version)
	}
	p, err := paramsOf(prof, m.Params)
	if err != nil {
		return err
	}
	rf := refs{b: base, sources: prof.Sources, noRates: prof.TotalRates}
	m.Tables = append(tables(m, rf, prof.Tables(p)), concurrencyTable(m), driversTable(m))
	return nil
}

// paramsOf reads back the parameters a report lists (see params).
func paramsOf(prof *Profile, ps []Param) (Params, error) {
	var p Params
	var err error
	for _, kv := range ps {
		var e error
		switch kv.Name {
		case "profile":
		case "duration":
			p.Duration, e = time.ParseDuration(kv.Value)
		case "ops":
			p.Ops, e = strconv.ParseInt(kv.Value, 10, 64)
		case "warmup":
			var w time.Duration
			w, e = time.ParseDuration(kv.Value)
			p.Warmup = &w
		case "workers":
			p.Workers, e = strconv.Atoi(kv.Value)
		case "rate":
			p.Rate, e = strconv.ParseFloat(kv.Value, 64)
		case "mix":
			p.Mix, e = ParseMix(kv.Value)
		case "timeout":
			p.Timeout, e = time.ParseDuration(kv.Value)
		default:
			e = prof.SetParams(&p, []string{kv.Name + "=" + kv.Value})
		}
		if e != nil {
			err = errors.Join(err, fmt.Errorf("parameter %s=%s: %w", kv.Name, kv.Value, e))
		}
	}
	p.ClosedLoop = p.Rate == 0
	return p, err
}

// driversTable has each driver's own figures per measured stage, then the
// stage's merged figures.
func driversTable(m *Report) Table {
	t := Table{ID: "drivers", Title: "Drivers (Mongoose's distributed mode): each driver's own window and figures, then their sum",
		Header:     []string{"Task", "Driver", "Host", "Start (ms after the first)", "Seconds", "Ops", "Failed", "Throughput (ops/s)", "p50 (ms)", "p99 (ms)", "Mean in flight"},
		RightAlign: []bool{false, true, false, true, true, true, true, true, true, true, true}}
	for si, s := range m.Stages {
		if s.Setup {
			continue
		}
		first := s.Started
		for _, d := range m.Drivers {
			first = minTime(first, d.Stages[si].Started)
		}
		var count, failed uint64
		for _, d := range m.Drivers {
			ds := d.Stages[si]
			count, failed = count+ds.Count, failed+ds.Failed
			t.Rows = append(t.Rows, []string{s.Name, strconv.Itoa(d.Shard), d.Host, num(ms(ds.Started.Sub(first))), num(ds.Seconds),
				strconv.FormatUint(ds.Count, 10), strconv.FormatUint(ds.Failed, 10), num(ds.Throughput), num(ds.Overall.P50), num(ds.Overall.P99), little(ds.Concurrency)})
		}
		t.Rows = append(t.Rows, []string{s.Name, "all", "", num(ms(s.Started.Sub(first))), num(s.Seconds), strconv.FormatUint(count, 10),
			strconv.FormatUint(failed, 10), num(s.Throughput), num(s.Overall.P50), num(s.Overall.P99), little(s.Concurrency)})
	}
	t.Notes = []string{"The summary rate (row all) is the sum of the drivers' rates, each over its own measured window; its Seconds is the window where all of them ran. Its percentiles are those of every driver's samples together (histograms merged bucket by bucket)."}
	return t
}

func little(c *Concurrency) string {
	if c == nil {
		return "-"
	}
	return num(c.Little)
}
