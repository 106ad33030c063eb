//go:build integration

package clusters

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dbcanary/dbcanary/test/pager"
)

// The node faults' pages are counted as test/pages counts them (test/pager):
// the alerts go from the test's Prometheus to a real Alertmanager (Debian's,
// test/stack/alertmanager.sh) running the shipped alerts/alertmanager.yml,
// routing and inhibition unchanged, whose receivers post to the test's
// webhook. Only the route's timings are scaled like the rules (0.05:
// group_wait 30s becomes 2s, group_interval 5m 15s), so a page arrives
// seconds after its alert fires.

const (
	amScale   = 0.05
	amMinWait = 2 * time.Second
)

// pagesSince names the pages since t0 of the target's groups: a page is a
// pager notification that opens an incident (a group's first firing
// notification, or its first after it resolved), named by the group's
// labels ("DbcanaryTargetDown{target=x}").
func pagesSince(w *pager.Webhook, t0 time.Time, target string) []string {
	open := map[string]bool{}
	var out []string
	for _, n := range w.All() {
		if n.Receiver != pager.ReceiverPager {
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
func notifiedSince(w *pager.Webhook, t0 time.Time, target string) []string {
	var out []string
	for _, n := range w.All() {
		if n.At.Before(t0) || n.GroupLabels["target"] != target {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s", n.Receiver, n.Status, alertName(n.GroupLabels)))
	}
	return out
}

// sameSet reports whether a and b hold the same names, in any order.
func sameSet(a, b []string) bool {
	x, y := append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	return strings.Join(x, "\n") == strings.Join(y, "\n")
}
