//go:build integration

package clusters

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/test/stack"
)

// The node faults' pages are counted as test/pages counts them: the
// alerts go from the test's Prometheus to a real Alertmanager (Debian's,
// test/stack/alertmanager.sh) running the shipped alerts/alertmanager.yml,
// routing and inhibition unchanged, whose receivers post to the test's
// webhook. Only the route's timings are scaled like the rules (0.05:
// group_wait 30s becomes 2s, group_interval 5m 15s), so a page arrives
// seconds after its alert fires.

const (
	receiverPager  = "pager"
	receiverTicket = "ticket"
	// amScale scales the route timings (at least amMinWait) as the rules are.
	amScale   = 0.05
	amMinWait = 2 * time.Second
)

// notification is one webhook POST from Alertmanager.
type notification struct {
	Receiver    string            `json:"receiver"`
	Status      string            `json:"status"`
	GroupKey    string            `json:"groupKey"`
	GroupLabels map[string]string `json:"groupLabels"`
	Alerts      []struct {
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
	At time.Time `json:"-"`
}

// webhook records every notification, in arrival order.
type webhook struct {
	url string
	mu  sync.Mutex
	got []notification
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var n notification
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
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// pagesSince names the pages since t0 of the target's groups: a page is a
// pager notification that opens an incident (a group's first firing
// notification, or its first after it resolved), named by the group's
// labels ("DbcanaryTargetDown{target=x}").
func (w *webhook) pagesSince(t0 time.Time, target string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	open := map[string]bool{}
	var out []string
	for _, n := range w.got {
		if n.Receiver != receiverPager {
			continue
		}
		switch n.Status {
		case "firing":
			if !open[n.GroupKey] && !n.At.Before(t0) && n.GroupLabels["target"] == target {
				out = append(out, alertName(n.GroupLabels))
			}
			open[n.GroupKey] = true
		case "resolved":
			open[n.GroupKey] = false
		}
	}
	return out
}

// notifiedSince is every notification since t0 about the target, for the log.
func (w *webhook) notifiedSince(t0 time.Time, target string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range w.got {
		if n.At.Before(t0) || n.GroupLabels["target"] != target {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s", n.Receiver, n.Status, alertName(n.GroupLabels)))
	}
	return out
}

// alertmanagerConfig is alerts/alertmanager.yml with the receivers' webhook
// URLs pointed at the test's webhook (<url>/<receiver>) and the route
// timings scaled by amScale.
func alertmanagerConfig(t *testing.T, hookURL string) []byte {
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
			t.Fatalf("%s: receiver %q has no webhook_configs to point at the test's webhook", path, name)
		}
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			hm["url"] = hookURL + "/" + name
		}
		names[name] = true
	}
	if !names[receiverPager] || !names[receiverTicket] {
		t.Fatalf("%s: receivers %v, want %q and %q", path, names, receiverPager, receiverTicket)
	}
	var scale func(route map[string]any)
	scale = func(route map[string]any) {
		for _, k := range []string{"group_wait", "group_interval"} {
			s, ok := route[k].(string)
			if !ok {
				continue
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("%s: %s %q: %v", path, k, s, err)
			}
			route[k] = max(time.Duration(float64(d)*amScale), amMinWait).String()
		}
		subs, _ := route["routes"].([]any)
		for _, r := range subs {
			if rm, ok := r.(map[string]any); ok {
				scale(rm)
			}
		}
	}
	root, _ := cfg["route"].(map[string]any)
	if root == nil {
		t.Fatalf("%s: no route", path)
	}
	if _, ok := root["group_wait"]; !ok {
		root["group_wait"] = amMinWait.String() // the default 30s, scaled
	}
	if _, ok := root["group_interval"]; !ok {
		root["group_interval"] = "15s" // the default 5m, scaled
	}
	scale(root)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startAlertmanager starts a private Alertmanager on the shipped config
// (receivers on hook) and returns its address (host:port).
func startAlertmanager(t *testing.T, dir string, hook *webhook) string {
	t.Helper()
	cfg := filepath.Join(dir, "alertmanager-shipped.yml")
	if err := os.WriteFile(cfg, alertmanagerConfig(t, hook.url), 0o644); err != nil {
		t.Fatal(err)
	}
	env := startPrivate(t, "alertmanager", dir, fmt.Sprintf("DBCANARY_ALERTMANAGER_PORT=%d", stack.FreePort(t)), "DBCANARY_ALERTMANAGER_CONFIG="+cfg)
	return strings.TrimPrefix(env.Get(t, "DBCANARY_TEST_ALERTMANAGER_URL"), "http://")
}

// sameSet reports whether a and b hold the same names, in any order.
func sameSet(a, b []string) bool {
	x, y := append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	return strings.Join(x, "\n") == strings.Join(y, "\n")
}
