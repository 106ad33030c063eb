// Command recheck judges a recorded make soak-chaos run again with the
// current checker (test/chaos/history) and prints its table: after a change
// to the checker, a 2-hour run's records need not be recorded again to see
// the new verdict.
//
//	go run ./test/chaos/recheck [flags] RUN_DIR
//
// RUN_DIR is the run's directory (artefacts/<time>/<time>-seed<N>, with
// nemesis.jsonl, notifications.jsonl, samples.jsonl, leftovers.jsonl). Runs
// recorded before the samples counted the series failures create on first
// use (6 Dec 2026) can take those counts from the run's own Prometheus:
// start one on a copy of RUN_DIR/prometheus/data and pass --prometheus.
// Exit status 1 when the run fails its checker, 2 on a usage or read error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/dbcanary/dbcanary/test/chaos/history"
)

// The series failures create on first use, and the most the layout allows
// (history.ReadScrape's rules, in PromQL over the run's Prometheus).
const (
	firstUseQuery = `count({job="dbcanary",__name__=~"dbcanary_op_(latency|service_time)_seconds_(bucket|sum|count)",result="error"} or vector(0)) - 1 + ` +
		`count(dbcanary_op_failures_total{cause=~"timeout|refused|dns|tls|auth|setup|stale|server|other"} or vector(0)) - 1`
	firstUseMaxQuery = `count({job="dbcanary",__name__=~"dbcanary_op_(latency|service_time)_seconds_(bucket|sum|count)",result="ok"}) + 9 * count(count by (target, backend, op) (dbcanary_op_failures_total))`
)

func main() {
	prom := flag.String("prometheus", "", "URL of a Prometheus serving the run's TSDB, to count the series failures create on first use")
	lossy := flag.String("lossy", "mq-lossy", "the target configured to lose acknowledged writes")
	seed := flag.String("seed", "?", "the run's seed, for the table's first line")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: recheck [--prometheus URL] [--lossy TARGET] [--seed N] RUN_DIR")
		os.Exit(2)
	}
	code, err := run(flag.Arg(0), *prom, *lossy, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recheck:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(dir, prom, lossy, seed string) (int, error) {
	h, err := history.Load(dir, time.Time{}, time.Time{})
	if err != nil {
		return 0, err
	}
	if len(h.Samples) < 2 {
		return 0, fmt.Errorf("%s: fewer than 2 samples in %s", dir, history.FileSamples)
	}
	h.Start, h.End = h.Samples[0].At.Truncate(time.Second), h.Samples[len(h.Samples)-1].At
	if prom != "" {
		for i := range h.Samples {
			s := &h.Samples[i]
			if s.FirstUse, err = instant(prom, firstUseQuery, s.At); err != nil {
				return 0, err
			}
			if s.FirstUseMax, err = instant(prom, firstUseMaxQuery, s.At); err != nil {
				return 0, err
			}
		}
	}
	run := h.End.Sub(h.Start).Round(time.Minute)
	r := history.Check(h, history.RunOptions(run, lossy))
	fmt.Printf("make soak-chaos SEED=%s DURATION=%s: %s to %s UTC, judged again by test/chaos/recheck\n\n%s",
		seed, run, h.Start.UTC().Format("2006-01-02 15:04"), h.End.UTC().Format("15:04"), r.Table(h.Start))
	if r.Failed() {
		return 1, nil
	}
	return 0, nil
}

// instant evaluates a query that returns one number at t.
func instant(base, query string, t time.Time) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := base + "/api/v1/query?" + url.Values{"query": {query}, "time": {strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("--prometheus %q: %w", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("--prometheus %q: %w", base, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("--prometheus %q: not a Prometheus query answer: %w", base, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("--prometheus %q: %s", base, body.Error)
	}
	if len(body.Data.Result) == 0 {
		return 0, nil // nothing scraped yet at t
	}
	v, ok := body.Data.Result[0].Value[1].(string)
	if !ok {
		return 0, errors.New("--prometheus: a value that is not a number")
	}
	return strconv.ParseFloat(v, 64)
}
