//go:build integration

package pages

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/stack"
)

// proc is a server process this test started; it is stopped by its PID
// (SIGTERM, then SIGKILL after 20 s) when the test ends.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, name, logPath string, bin string, args ...string) *proc {
	t.Helper()
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *proc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Logf("%s (pid %d) still running 20s after SIGTERM: killing it", p.name, p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process is gone.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n bytes of the process's log.
func (p *proc) tail(n int64) string {
	f, err := os.Open(p.log)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// freeAddr returns 127.0.0.1:<a free port>.
func freeAddr(t *testing.T) string { t.Helper(); return stack.FreeAddr(t) }

// waitReady polls url until it answers 200, failing the test after timeout.
func waitReady(t *testing.T, p *proc, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s not ready at %s after %s (exited: %v); log:\n%s", p.name, url, timeout, p.exited(), p.tail(4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var httpc = &http.Client{Timeout: 30 * time.Second}

// getJSON decodes a GET answer.
func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// promSample is one instant-vector element.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) val() float64 {
	str, _ := s.Value[1].(string)
	var f float64
	_, _ = fmt.Sscan(str, &f)
	return f
}

// query runs an instant query on Prometheus.
func query(ctx context.Context, promURL, expr string) ([]promSample, error) {
	return queryAt(ctx, promURL, expr, "")
}

// queryAt runs an instant query with extra URL parameters (e.g. "&time=...").
func queryAt(ctx context.Context, promURL, expr, params string) ([]promSample, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSample `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, promURL+"/api/v1/query?query="+url.QueryEscape(expr)+params, &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	return r.Data.Result, nil
}

// request sends a request with an optional JSON body and returns status and body.
func request(ctx context.Context, method, u, body string) (int, string, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(b), nil
}

// queryMax runs a range query from `from` to `to` every step and returns
// the highest value of each series, by its label set.
func queryMax(ctx context.Context, promURL, expr string, from, to time.Time, step time.Duration) (map[string]float64, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	u := fmt.Sprintf("%s/api/v1/query_range?query=%s&start=%d&end=%d&step=%d", promURL, url.QueryEscape(expr), from.Unix(), to.Unix(), int(step.Seconds()))
	if err := getJSON(ctx, u, &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		for _, v := range s.Values {
			str, _ := v[1].(string)
			var f float64
			_, _ = fmt.Sscan(str, &f)
			k := labelKey(s.Metric)
			if cur, ok := out[k]; !ok || f > cur {
				out[k] = f
			}
		}
	}
	return out, nil
}
