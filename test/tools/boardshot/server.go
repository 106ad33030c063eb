package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

//go:embed page
var pageFS embed.FS

// PanelReport is what the page says it drew in one panel.
type PanelReport struct {
	ID     int    `json:"id"`
	Title  string `json:"title"`
	Type   string `json:"type"`
	Series int    `json:"series"`
	State  string `json:"state"` // drawn, no data, error: ..., not drawn: ...
}

// server serves the page, the plan and uPlot, forwards the plan's queries
// (and no others) to Prometheus, and receives the page's report.
type server struct {
	plan    *Plan
	exprs   map[string]bool
	prom    *url.URL
	uplot   string // directory holding uPlot.iife.min.js and uPlot.min.css
	client  *http.Client
	once    sync.Once
	done    chan struct{}
	mu      sync.Mutex
	reports []PanelReport
}

func newServer(plan *Plan, prom *url.URL, uplotDir string) *server {
	return &server{plan: plan, exprs: plan.Exprs(), prom: prom, uplot: uplotDir,
		client: &http.Client{Timeout: 60 * time.Second}, done: make(chan struct{})}
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	page, _ := fs.Sub(pageFS, "page")
	mux.Handle("GET /", http.FileServerFS(page))
	mux.Handle("GET /uplot/", http.StripPrefix("/uplot/", http.FileServer(http.Dir(s.uplot))))
	mux.HandleFunc("GET /plan.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.plan)
	})
	mux.HandleFunc("GET /api/v1/query", s.proxy)
	mux.HandleFunc("GET /api/v1/query_range", s.proxy)
	mux.HandleFunc("POST /report", s.report)
	return mux
}

// proxy forwards one of the plan's queries to Prometheus unchanged.
func (s *server) proxy(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query().Get("query"); !s.exprs[q] {
		http.Error(w, "boardshot forwards the board's own queries only", http.StatusForbidden)
		return
	}
	u := *s.prom
	u.Path = r.URL.Path
	u.RawQuery = r.URL.RawQuery
	resp, err := s.client.Get(u.String())
	if err != nil {
		http.Error(w, "prometheus: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		http.Error(w, "prometheus: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

func (s *server) report(w http.ResponseWriter, r *http.Request) {
	var rs []PanelReport
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reports = rs
	s.mu.Unlock()
	s.once.Do(func() { close(s.done) })
	w.WriteHeader(http.StatusNoContent)
}

// Reports returns the page's report once it has come, or an error after d.
func (s *server) Reports(d time.Duration) ([]PanelReport, error) {
	select {
	case <-s.done:
	case <-time.After(d):
		return nil, fmt.Errorf("the page sent no report within %s: it did not finish drawing", d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reports, nil
}

// loopbackURL parses a Prometheus URL and refuses any host but this machine.
func loopbackURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-prometheus %q: want http://HOST:PORT", raw)
	}
	if !loopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("-prometheus %q: boardshot queries a Prometheus on this machine only (127.0.0.0/8, ::1, localhost)", raw)
	}
	u.Path, u.RawQuery = "", ""
	return u, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// listenLoopback listens on addr, which must be a loopback address.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("-listen %q: %v", addr, err)
	}
	if !loopbackHost(host) {
		return nil, fmt.Errorf("-listen %q: boardshot serves on a loopback address only", addr)
	}
	return net.Listen("tcp", addr)
}

// summary is the report as text, one line per panel.
func summary(rs []PanelReport) string {
	var b bytes.Buffer
	for _, r := range rs {
		fmt.Fprintf(&b, "  %-10s %-45q %3d series  %s\n", r.Type, r.Title, r.Series, r.State)
	}
	return b.String()
}
