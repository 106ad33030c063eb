// Package pager is the receiving end of the tests that count pages: a
// webhook the shipped Alertmanager config's receivers post to, and that
// config (alerts/alertmanager.yml) with only its webhook URLs pointed at it
// and, for time-scaled rules, its route timings scaled. test/pages and
// test/clusters use it, so both count a page the same way.
package pager

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/test/stack"
)

// The receivers of alerts/alertmanager.yml: critical alerts go to the
// pager, warnings to the ticket queue.
const (
	ReceiverPager  = "pager"
	ReceiverTicket = "ticket"
)

// Notification is one webhook POST from Alertmanager.
type Notification struct {
	Receiver string `json:"receiver"`
	Status   string `json:"status"`
	GroupKey string `json:"groupKey"`
	// GroupLabels identify the Alertmanager group (with the receiver).
	GroupLabels map[string]string `json:"groupLabels"`
	Alerts      []Alert           `json:"alerts"`
	At          time.Time         `json:"-"` // when it arrived
}

// Alert is one alert of a notification.
type Alert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	StartsAt    time.Time         `json:"startsAt"`
	Fingerprint string            `json:"fingerprint"`
}

// Webhook records every notification, in arrival order. A receiver posts to
// URL/<receiver name>.
type Webhook struct {
	URL string
	mu  sync.Mutex
	got []Notification
}

// NewWebhook starts the webhook on 127.0.0.1 until the test ends; logf, if
// not nil, gets a line per notification.
func NewWebhook(t testing.TB, logf func(format string, args ...any)) *Webhook {
	w := &Webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var n Notification
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		n.At = time.Now()
		if p := strings.TrimPrefix(r.URL.Path, "/"); p != n.Receiver {
			n.Receiver = p + "(posted as " + n.Receiver + ")"
		}
		w.mu.Lock()
		w.got = append(w.got, n)
		w.mu.Unlock()
		if logf != nil {
			var alerts []string
			for _, a := range n.Alerts {
				alerts = append(alerts, a.Status+" "+AlertString(a.Labels))
			}
			logf("%s notified (%s): %s", n.Receiver, n.Status, strings.Join(alerts, "; "))
		}
	}))
	t.Cleanup(srv.Close)
	w.URL = srv.URL
	return w
}

// All returns every notification so far, in arrival order.
func (w *Webhook) All() []Notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Notification(nil), w.got...)
}

// AlertString names an alert by its identifying labels, without the
// Dbcanary prefix: "TargetDown/critical{target=x,op=y}".
func AlertString(l map[string]string) string {
	var extra []string
	for _, k := range []string{"op", "phase", "cause", "window"} {
		if v := l[k]; v != "" {
			extra = append(extra, k+"="+v)
		}
	}
	s := fmt.Sprintf("%s/%s{target=%s", strings.TrimPrefix(l["alertname"], "Dbcanary"), l["severity"], l["target"])
	if len(extra) > 0 {
		s += "," + strings.Join(extra, ",")
	}
	return s + "}"
}

// ShippedConfig is alerts/alertmanager.yml with only the receivers' webhook
// URLs pointed at hookURL (<hookURL>/<receiver>) and, when scale is not 0 or
// 1, every route's group_wait and group_interval multiplied by scale (at
// least minWait; a root without them gets Alertmanager's defaults, 30s and
// 5m, scaled): the timings of rules time-scaled by the same factor.
func ShippedConfig(t testing.TB, hookURL string, scale float64, minWait time.Duration) []byte {
	t.Helper()
	path := filepath.Join(stack.RepoRoot(), "alerts", "alertmanager.yml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the shipped Alertmanager config: %v", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	names := map[string]bool{}
	recv, _ := cfg["receivers"].([]any)
	for _, r := range recv {
		rm, _ := r.(map[string]any)
		name, _ := rm["name"].(string)
		hooks, _ := rm["webhook_configs"].([]any)
		if len(hooks) == 0 {
			t.Fatalf("%s: receiver %q has no webhook_configs for the test to point at its webhook", path, name)
		}
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			hm["url"] = hookURL + "/" + name
		}
		names[name] = true
	}
	for _, want := range []string{ReceiverPager, ReceiverTicket} {
		if !names[want] {
			t.Fatalf("%s: no receiver named %q (pages are counted on %q, tickets on %q)", path, want, ReceiverPager, ReceiverTicket)
		}
	}
	if scale != 0 && scale != 1 {
		root, _ := cfg["route"].(map[string]any)
		if root == nil {
			t.Fatalf("%s: no route", path)
		}
		for k, def := range map[string]string{"group_wait": "30s", "group_interval": "5m"} {
			if _, ok := root[k]; !ok {
				root[k] = def
			}
		}
		var walk func(route map[string]any)
		walk = func(route map[string]any) {
			for _, k := range []string{"group_wait", "group_interval"} {
				s, ok := route[k].(string)
				if !ok {
					continue
				}
				d, err := time.ParseDuration(s)
				if err != nil {
					t.Fatalf("%s: %s %q: %v", path, k, s, err)
				}
				route[k] = max(time.Duration(float64(d)*scale), minWait).String()
			}
			subs, _ := route["routes"].([]any)
			for _, r := range subs {
				if rm, ok := r.(map[string]any); ok {
					walk(rm)
				}
			}
		}
		walk(root)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
