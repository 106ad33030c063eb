package history

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dbcanary/dbcanary/internal/metrics"
	"github.com/dbcanary/dbcanary/probes"
)

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// opSeries counts one op's latency and service-time lines by result.
type opSeries struct{ okLat, errLat, okST int }

// LazyCauses are the failure causes whose counter an op creates on its
// first failure of that cause: probes.Causes but metrics.EagerCauses.
func LazyCauses() []probes.Cause {
	var out []probes.Cause
	for _, c := range probes.Causes {
		if !slices.Contains(metrics.EagerCauses, c) {
			out = append(out, c)
		}
	}
	return out
}

// ReadScrape reads one text exposition of dbcanary's /metrics into s: every
// series (Series), the process's RSS, goroutines, open files and start time,
// the ledger checks that found a write missing or corrupted (by target), and
// apart, the series a failure creates on first use (FirstUse) with the most
// the documented layout allows for the ops of this scrape (FirstUseMax).
//
// docs/sizing.md ("When ops fail"): an op's first failure creates its error
// latency histogram (the ok histogram's bounds), its error service time and
// one counter per cause not created at zero (probes.Causes but
// metrics.EagerCauses); they stay until the process restarts or the target
// leaves the config. A run that meets many faults therefore gains series in
// steps up to that bound: that is the layout, not a leak, and the checker
// judges the rest (Series - FirstUse) flat and FirstUse against FirstUseMax.
// A counter of a cause outside probes.Causes is not a first-use series: it
// counts in the rest, where growth fails the run.
func ReadScrape(r io.Reader, s *Sample) error {
	if s.LedgerLost == nil {
		s.LedgerLost = map[string]float64{}
	}
	ops := map[string]*opSeries{}
	op := func(l map[string]string) *opSeries {
		k := l["target"] + "\x00" + l["backend"] + "\x00" + l["op"]
		if ops[k] == nil {
			ops[k] = &opSeries{}
		}
		return ops[k]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		s.Series++
		series, val, _ := strings.Cut(line, " ")
		if i := strings.LastIndexByte(series, '}'); i >= 0 {
			series, val = line[:i+1], strings.TrimSpace(line[i+1:])
		}
		v, _ := strconv.ParseFloat(strings.Fields(val + " ")[0], 64)
		name, labels, _ := strings.Cut(series, "{")
		l := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(labels, -1) {
			l[m[1]] = m[2]
		}
		switch name {
		case "process_resident_memory_bytes":
			s.RSS = v
		case "go_goroutines":
			s.Goroutines = v
		case "process_open_fds":
			s.OpenFDs = v
		case "process_start_time_seconds":
			s.Start = v
		case "dbcanary_ledger_checks_total":
			if res := l["result"]; res == "missing" || res == "corrupted" {
				s.LedgerLost[l["target"]] += v
			}
		case "dbcanary_op_latency_seconds_bucket", "dbcanary_op_latency_seconds_sum", "dbcanary_op_latency_seconds_count":
			switch l["result"] {
			case "ok":
				op(l).okLat++
			case "error":
				op(l).errLat++
				s.FirstUse++
			}
		case "dbcanary_op_service_time_seconds_bucket", "dbcanary_op_service_time_seconds_sum", "dbcanary_op_service_time_seconds_count":
			switch l["result"] {
			case "ok":
				op(l).okST++
			case "error":
				s.FirstUse++
			}
		case "dbcanary_op_failures_total":
			op(l)
			if slices.Contains(LazyCauses(), probes.Cause(l["cause"])) {
				s.FirstUse++
			}
		}
	}
	lazy := len(LazyCauses())
	for _, o := range ops {
		lat := o.okLat
		if lat == 0 { // an op that never succeeded: its error histogram has the same bounds
			lat = o.errLat
		}
		st := o.okST
		if st == 0 {
			st = 3 // +Inf, _sum, _count: no classic bound in the compact layout
		}
		s.FirstUseMax += float64(lat + st + lazy)
	}
	return sc.Err()
}
