package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
)

// maxMetricsBody bounds what check-endpoint reads of a /metrics page: a
// daemon's page is tens of KiB; anything past this is not dbcanary's.
const maxMetricsBody = 32 << 20

// defaultCheckMetrics are series every running daemon exports, whatever its
// targets (a shard may own none, so no per-target series is required).
var defaultCheckMetrics = []string{"dbcanary_build_info", "dbcanary_config_last_reload_successful", "dbcanary_targets"}

func newCheckEndpointCmd(stdout, stderr io.Writer) *cobra.Command {
	var urls, metrics []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check-endpoint",
		Short: "Check a running dbcanary's /-/ready and /metrics and exit non-zero naming what failed",
		Long: `Check a running dbcanary's web endpoint, as promtool check healthy does
for Prometheus: GET URL/-/ready must answer 200, and GET URL/metrics must answer
200 with a page in the Prometheus text format that parses and carries each
--metric. Every --url is checked; each failure is printed with its URL, and the
exit code is 1 when any failed (2 for a bad flag). The Helm chart's test hook
(helm test) runs it against the release's Service. No authentication: point it
at an endpoint without basic auth (https is verified against the system roots).`,
		Example: `  dbcanary check-endpoint --url http://127.0.0.1:19190`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bases, err := checkEndpointFlags(urls, metrics, timeout)
			if err != nil {
				return usageError(err)
			}
			failed := 0
			for _, base := range bases {
				summary, err := checkEndpoint(cmd.Context(), base, metrics, timeout)
				if err != nil {
					failed++
					fmt.Fprintf(stderr, "check-endpoint: %s: FAILED: %v\n", base, err)
					continue
				}
				fmt.Fprintf(stdout, "check-endpoint: %s: OK: %s\n", base, summary)
			}
			if failed > 0 {
				fmt.Fprintf(stderr, "check-endpoint: %d of %d endpoint(s) failed\n", failed, len(bases))
				return exitError{code: exitFailed}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&urls, "url", nil, "Base URL of a dbcanary web endpoint, e.g. http://dbcanary:19190 (repeatable; required).")
	f.StringArrayVar(&metrics, "metric", defaultCheckMetrics, "A metric name /metrics must carry at least one sample of (repeatable; replaces the default list).")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "Time allowed for each request.")
	return cmd
}

// checkEndpointFlags validates the flags and returns the base URLs, without a trailing slash.
func checkEndpointFlags(urls, metrics []string, timeout time.Duration) ([]string, error) {
	if len(urls) == 0 {
		return nil, errors.New("--url: at least one is required")
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("--timeout: must be positive, got %s", timeout)
	}
	for _, m := range metrics {
		if !model.LegacyValidation.IsValidMetricName(m) {
			return nil, fmt.Errorf("--metric: %q is not a metric name", m)
		}
	}
	var bases []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("--url: %v", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--url: %q must be http:// or https:// with a host, e.g. http://dbcanary:19190", raw)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("--url: %q: give the base URL only (no credentials, query or fragment)", u.Redacted())
		}
		bases = append(bases, strings.TrimSuffix(u.String(), "/"))
	}
	return bases, nil
}

// checkEndpoint checks base's /-/ready and /metrics and summarizes what it found.
func checkEndpoint(ctx context.Context, base string, metrics []string, timeout time.Duration) (string, error) {
	client := &http.Client{Timeout: timeout}
	if _, err := fetch(ctx, client, base+"/-/ready", ""); err != nil {
		return "", err
	}
	body, err := fetch(ctx, client, base+"/metrics", "text/plain;version=0.0.4")
	if err != nil {
		return "", err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("GET %s/metrics: the page does not parse as the Prometheus text format: %v", base, err)
	}
	var missing []string
	for _, m := range metrics {
		if len(fams[m].GetMetric()) == 0 {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("GET %s/metrics: no sample of %s (%d metric families on the page): not a dbcanary, or not running",
			base, strings.Join(missing, ", "), len(fams))
	}
	return fmt.Sprintf("/-/ready 200; /metrics parses, %d metric families, %s", len(fams), buildVersion(fams)), nil
}

// fetch gets u and returns its body, or an error naming u, the status and the
// start of the body when the answer is not 200.
func fetch(ctx context.Context, client *http.Client, u, accept string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("GET %s: %v", u, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err // *url.Error: names the method and the URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody+1))
	if err != nil {
		return "", fmt.Errorf("GET %s: reading the body: %v", u, err)
	}
	if len(b) > maxMetricsBody {
		return "", fmt.Errorf("GET %s: the body exceeds %d MiB", u, maxMetricsBody>>20)
	}
	if resp.StatusCode != http.StatusOK {
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if len(first) > 200 {
			first = first[:200] + "..."
		}
		return "", fmt.Errorf("GET %s: %s (want 200 OK): %q", u, resp.Status, first)
	}
	return string(b), nil
}

// buildVersion is the version label of dbcanary_build_info, for the OK line.
func buildVersion(fams map[string]*dto.MetricFamily) string {
	for _, m := range fams["dbcanary_build_info"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "version" {
				return "dbcanary_build_info version " + l.GetValue()
			}
		}
	}
	return "no dbcanary_build_info version"
}
