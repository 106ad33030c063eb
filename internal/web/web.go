// Package web serves dbcanary's HTTP endpoints: the status page (/) and its
// JSON form (/status.json), /metrics, /-/healthy, /-/ready and /-/reload. TLS and basic auth come from
// --web.config.file through prometheus/exporter-toolkit.
package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/dbcanary/dbcanary/internal/status"
	"github.com/dbcanary/dbcanary/probes"
)

// Options configures the handler.
type Options struct {
	Registry    *prometheus.Registry
	MetricsPath string
	Version     string
	// Reload loads the config file again; it returns the reason a bad config was rejected.
	Reload func() error
	// Ready reports whether the initial config is loaded and targets started.
	Ready  func() bool
	Logger *slog.Logger
	// Status, when set, makes the landing page the status page and serves
	// its state at StatusJSONPath; without it the landing page is a list of links.
	Status *status.Store
}

// Handler builds the HTTP handler.
func Handler(o Options) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle(o.MetricsPath, promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelError),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
		Registry:          o.Registry,
	}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if o.Ready != nil && !o.Ready() {
			http.Error(w, "Not ready: configuration not loaded yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "Only POST requests allowed", http.StatusMethodNotAllowed)
			return
		}
		if err := o.Reload(); err != nil {
			http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "Reloaded")
	})
	if o.Status != nil {
		p := &statusPage{store: o.Status, metricsLink: strings.TrimPrefix(o.MetricsPath, "/"), logger: o.Logger}
		mux.HandleFunc(StatusJSONPath, p.json)
		if o.MetricsPath != "/" {
			mux.HandleFunc("/{$}", p.html)
		}
	} else if o.MetricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "dbcanary",
			Description: "Continuous verified canaries for " + probes.Stores(),
			Version:     o.Version,
			Links: []web.LandingLinks{
				{Address: o.MetricsPath, Text: "Metrics"},
				{Address: "/-/healthy", Text: "Health"},
				{Address: "/-/ready", Text: "Readiness"},
			},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

// Serve listens on flags' addresses until the server is shut down.
func Serve(srv *http.Server, flags *web.FlagConfig, logger *slog.Logger) error {
	return web.ListenAndServe(srv, flags, logger)
}
