package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// dbcanaryPage is the smallest /metrics page check-endpoint accepts by default.
const dbcanaryPage = `# TYPE dbcanary_build_info gauge
dbcanary_build_info{version="1.2.3",revision="abc"} 1
# TYPE dbcanary_config_last_reload_successful gauge
dbcanary_config_last_reload_successful 1
# TYPE dbcanary_targets gauge
dbcanary_targets 0
`

// endpoint serves /-/ready with readyCode and /metrics with metricsCode and page.
func endpoint(t *testing.T, readyCode, metricsCode int, page string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if readyCode != http.StatusOK {
			http.Error(w, "Not ready: configuration not loaded yet", readyCode)
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
			t.Errorf("Accept %q, want the text format", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.WriteHeader(metricsCode)
		fmt.Fprint(w, page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCheckEndpoint: a healthy endpoint passes with a summary on stdout; each
// way an endpoint can fail exits 1 with a line naming its URL and what failed.
func TestCheckEndpoint(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cases := []struct {
		name  string
		url   string
		code  int
		wants []string // in stdout for exit 0, in stderr otherwise
	}{
		{"healthy", endpoint(t, 200, 200, dbcanaryPage), 0, []string{": OK: /-/ready 200; /metrics parses, 3 metric families, dbcanary_build_info version 1.2.3"}},
		{"not ready", endpoint(t, 503, 200, dbcanaryPage), exitFailed, []string{"/-/ready: 503 Service Unavailable (want 200 OK): \"Not ready: configuration not loaded yet\""}},
		{"metrics error", endpoint(t, 200, 500, "boom\nsecond line"), exitFailed, []string{"/metrics: 500 Internal Server Error (want 200 OK): \"boom\""}},
		{"metrics garbage", endpoint(t, 200, 200, "<html>not metrics</html>\n"), exitFailed, []string{"/metrics: the page does not parse as the Prometheus text format"}},
		{"not dbcanary", endpoint(t, 200, 200, "# TYPE go_goroutines gauge\ngo_goroutines 7\n"), exitFailed,
			[]string{"/metrics: no sample of dbcanary_build_info, dbcanary_config_last_reload_successful, dbcanary_targets (1 metric families on the page)"}},
		{"refused", closed.URL, exitFailed, []string{`Get "` + closed.URL + `/-/ready"`, "connection refused"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, "check-endpoint", "--url", tc.url+"/", "--timeout", "5s")
			got := out
			if tc.code != 0 {
				got = errOut
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if !strings.Contains(got, tc.url+": ") {
				t.Errorf("output does not name the URL %s:\n%s", tc.url, got)
			}
			for _, w := range tc.wants {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestCheckEndpointSeveral: every URL is checked; one failure fails the run
// and the summary counts it.
func TestCheckEndpointSeveral(t *testing.T) {
	good, bad := endpoint(t, 200, 200, dbcanaryPage), endpoint(t, 503, 200, dbcanaryPage)
	code, out, errOut := run(t, "check-endpoint", "--url", bad, "--url", good)
	if code != exitFailed || !strings.Contains(out, good+": OK") || !strings.Contains(errOut, bad+": FAILED") ||
		!strings.Contains(errOut, "1 of 2 endpoint(s) failed") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// --metric replaces the default list.
	page := endpoint(t, 200, 200, "# TYPE dbcanary_target_up gauge\ndbcanary_target_up{target=\"a\"} 1\n")
	if code, out, errOut := run(t, "check-endpoint", "--url", page, "--metric", "dbcanary_target_up"); code != 0 {
		t.Errorf("--metric dbcanary_target_up: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCheckEndpointUsage: bad flags are usage errors (exit 2) naming the flag,
// and a URL's credentials are never echoed.
func TestCheckEndpointUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--url: at least one is required"},
		{[]string{"--url", "localhost:19190"}, `must be http:// or https:// with a host`},
		{[]string{"--url", "ftp://x:21"}, `"ftp://x:21" must be http:// or https://`},
		{[]string{"--url", "http://user:s3cret@x:19190"}, "give the base URL only"},
		{[]string{"--url", "http://x:19190?a=b"}, "give the base URL only"},
		{[]string{"--url", "http://x:19190", "--metric", "not-a-name"}, `--metric: "not-a-name" is not a metric name`},
		{[]string{"--url", "http://x:19190", "--timeout", "0s"}, "--timeout: must be positive"},
		{[]string{"--url", "http://x:19190", "extra"}, "unknown command"},
	} {
		code, _, errOut := run(t, append([]string{"check-endpoint"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "s3cret") {
			t.Errorf("%v: exit %d, want %d with %q\n%s", tc.args, code, exitUsage, tc.want, errOut)
		}
	}
}

// TestCheckEndpointOnTheDaemon: a real `dbcanary run` passes with the default
// --metric list, before any op ran (a shard owning no target looks the same).
func TestCheckEndpointOnTheDaemon(t *testing.T) {
	cfg := writeConfig(t, t.TempDir(), cliNoopConfig)
	base, stop := startDaemon(t, &http.Client{Timeout: 5 * time.Second}, "http", "--config.file", cfg)
	defer stop()
	code, out, errOut := run(t, "check-endpoint", "--url", base)
	if code != 0 || !strings.Contains(out, base+": OK: /-/ready 200; /metrics parses") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
