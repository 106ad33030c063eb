package web

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the page's template and stylesheet
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbcanary/dbcanary/internal/status"
	"github.com/dbcanary/dbcanary/probes"
)

// StatusJSONPath is where the status page's state is served as JSON.
const StatusJSONPath = "/status.json"

// DefaultRefresh is how often the status page reloads itself; ?refresh=N
// overrides it (0: never).
const DefaultRefresh = 15

var (
	//go:embed status.html
	statusHTML string
	//go:embed status.css
	statusCSS string

	statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
		"ago":       ago,
		"stamp":     stamp,
		"dur":       dur,
		"stateText": stateText,
	}).Parse(statusHTML))

	// The only thing the page loads is its own inline stylesheet.
	statusCSP = func() string {
		sum := sha256.Sum256([]byte(statusCSS))
		return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
			"'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	}()

	bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

type statusPage struct {
	store       *status.Store
	metricsLink string
	logger      *slog.Logger
}

// pageData is what the template renders.
type pageData struct {
	status.Snapshot
	Failing       []status.TargetStatus
	Losses        []lossLine // durability ledger losses in the failure window
	Rows          []row
	Refresh       int
	MetricsLink   string
	FailureWindow string
	LatencyWindow string
	CSS           template.CSS
}

func (p *statusPage) html(w http.ResponseWriter, r *http.Request) {
	if !allowGet(w, r) {
		return
	}
	refresh := DefaultRefresh
	if v := r.URL.Query().Get("refresh"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, "refresh: want a number of seconds (0: never)", http.StatusBadRequest)
			return
		}
		refresh = n
		if n > 0 {
			refresh = min(max(n, 2), 3600)
		}
	}
	snap := p.store.Snapshot()
	losses := recentLosses(snap, p.store.FailureWindow())
	// On the page (not in the JSON, whose state is the ops'), a target whose
	// ledger lost a write in the window is shown red and first.
	for _, l := range losses {
		for i := range snap.Targets {
			if snap.Targets[i].Name == l.Target {
				snap.Targets[i].State = status.StateFailing
			}
		}
	}
	snap.SortForPage()
	data := pageData{
		Snapshot:      snap,
		Failing:       snap.Failing(),
		Losses:        losses,
		Rows:          rows(snap, p.store.FailureWindow()),
		Refresh:       refresh,
		MetricsLink:   p.metricsLink,
		FailureWindow: minutes(p.store.FailureWindow()),
		LatencyWindow: minutes(status.LatencyWindow),
		CSS:           template.CSS(statusCSS),
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); bufPool.Put(buf) }()
	if err := statusTmpl.Execute(buf, data); err != nil {
		p.logger.Error("rendering the status page", "err", err)
		http.Error(w, "cannot render the status page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", statusCSP)
	setCommonHeaders(h, buf.Len())
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// row is one op's table row, formatted in Go: a template action costs a
// reflective call, so the per-row template does little more than print fields
// (this keeps 1,000 targets well under the refresh interval).
type row struct {
	First, Last bool
	Target      *targetCells // set on a target's first row
	NoOps       bool
	Op          string
	State       status.State
	StateText   string
	Cause       string // on failing ops
	Since       template.HTML
	LastSuccess template.HTML
	Failures    template.HTML
	Latency     template.HTML
	Errors      []errorCells
	// Ledger is set on a target's durability ledger row (after its ops).
	Ledger *ledgerCells
}

// ledgerCells is a target's durability ledger row.
type ledgerCells struct {
	State  string // intact, loss, not_checked
	Text   string
	Detail template.HTML
}

type targetCells struct {
	Name, Backend, Namespace string
	Cert                     template.HTML // the store's first TLS certificate to expire, if any
	Nodes                    template.HTML // the store's nodes as the driver sees them, if it knows
	State                    status.State
	Rowspan                  int
}

// certSoon is when the page starts to highlight a certificate expiry: the
// default of the DbcanaryTLSCertExpiringSoon warning (docs/alerts-dashboards.md).
const certSoon = 21 * 24 * time.Hour

// span is a duration in whole days, or hours under two days.
func span(d time.Duration) string {
	if d < 48*time.Hour {
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

// certCell renders the first certificate to expire among those the store presented.
func certCell(now time.Time, c *status.CertStatus) template.HTML {
	if c == nil {
		return ""
	}
	left := c.NotAfter.Sub(now)
	class, when := "cert", "in "+span(left)
	switch {
	case left <= 0:
		class, when = "cert expired", span(-left)+" ago"
	case left < certSoon:
		class = "cert soon"
	}
	iso := c.NotAfter.UTC().Format(time.RFC3339)
	return template.HTML(`<div class="` + class + `" title="` + template.HTMLEscapeString(c.Subject) + `">TLS certificate expires <time datetime="` +
		iso + `">` + c.NotAfter.UTC().Format("2006-01-02") + `</time> (` + when + `)</div>`)
}

// nodesCell is the store's nodes under the namespace: "3 nodes up", or the
// down ones named ("node 127.0.0.12:9042 down, 2 of 3 up"); the page does not
// turn red for them (the target's ops say whether it serves).
func nodesCell(nodes []status.NodeStatus) template.HTML {
	if len(nodes) == 0 {
		return ""
	}
	var down, up []string
	for _, n := range nodes {
		if n.Up {
			up = append(up, n.Node)
		} else {
			down = append(down, n.Node)
		}
	}
	all := template.HTMLEscapeString(strings.Join(append(slices.Clone(down), up...), ", "))
	if len(down) == 0 {
		return template.HTML(`<div class="nodes" title="` + all + `">` + plural(len(up), "node") + ` up</div>`)
	}
	names := make([]string, len(down))
	for i, d := range down {
		names[i] = `<code>` + template.HTMLEscapeString(d) + `</code>`
	}
	return template.HTML(`<div class="nodes down" title="` + all + `">` + plural(len(down), "node") + ` down: ` + strings.Join(names, ", ") +
		`; ` + strconv.Itoa(len(up)) + ` of ` + strconv.Itoa(len(nodes)) + ` up</div>`)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

type errorCells struct {
	Stamp   template.HTML
	Count   string // " ×N" for a repeated message
	Cause   string
	Message string
}

const dash template.HTML = `<span class="muted">—</span>`

// lossLine is a target's latest durability ledger loss, for the summary.
type lossLine struct {
	Target, What, Age string
	Result            probes.LedgerResult
	At                time.Time
}

// recentLosses lists the targets whose ledger found an acknowledged write
// missing or corrupted within window: the page stays red for them even
// though the next ledger_check (other entries, intact) made the op ok again.
func recentLosses(snap status.Snapshot, window time.Duration) []lossLine {
	var out []lossLine
	for _, t := range snap.Targets {
		if t.Ledger == nil || t.Ledger.LastLoss == nil || snap.Generated.Sub(t.Ledger.LastLoss.At) > window {
			continue
		}
		ll := t.Ledger.LastLoss
		out = append(out, lossLine{Target: t.Name, What: strings.TrimSpace(ll.Where + " " + ll.Key), Age: ll.Age, Result: ll.Result, At: ll.At})
	}
	return out
}

func rows(snap status.Snapshot, window time.Duration) []row {
	now := snap.Generated
	n := 0
	for _, t := range snap.Targets {
		n += max(len(t.Ops), 1)
	}
	out := make([]row, 0, n)
	for _, t := range snap.Targets {
		tc := &targetCells{Name: t.Name, Backend: t.Backend, Namespace: t.Namespace, Cert: certCell(now, t.TLSCert), Nodes: nodesCell(t.Nodes), State: t.State, Rowspan: max(len(t.Ops), 1)}
		if t.Ledger != nil && len(t.Ops) > 0 {
			tc.Rowspan++
		}
		if len(t.Ops) == 0 {
			out = append(out, row{First: true, Last: true, Target: tc, NoOps: true, State: t.State})
			continue
		}
		for i, o := range t.Ops {
			r := row{First: i == 0, Last: i == len(t.Ops)-1 && t.Ledger == nil, Op: o.Name, State: o.State, StateText: stateText(o.State),
				Since: dash, LastSuccess: ago(now, o.LastSuccess), Failures: dash, Latency: dash}
			if i == 0 {
				r.Target = tc
			}
			if o.State == status.StateFailing {
				r.Cause = string(o.LastCause)
			}
			if !o.Since.IsZero() {
				r.Since = ago(now, o.Since)
			}
			if o.Runs > 0 {
				r.Failures = failures(o)
			}
			if o.Latency.Samples > 0 {
				r.Latency = template.HTML(dur(o.Latency.P50) + " / " + dur(o.Latency.P99))
			}
			for _, e := range o.Errors {
				ec := errorCells{Stamp: stamp(now, e.Last), Cause: string(e.Cause), Message: e.Message}
				if e.Count > 1 {
					ec.Count = " ×" + strconv.FormatUint(e.Count, 10)
				}
				r.Errors = append(r.Errors, ec)
			}
			out = append(out, r)
		}
		if t.Ledger != nil {
			out = append(out, row{Last: true, Op: "durability ledger", Ledger: ledgerRow(now, t.Ledger, window)})
		}
	}
	return out
}

// ledgerRow says what the target's durability ledger holds and what its
// checks found: the answer to "is an acknowledged write gone?".
// A loss older than window no longer makes the row red (unless no check
// ever found an entry intact); it stays named.
func ledgerRow(now time.Time, l *probes.LedgerStatus, window time.Duration) *ledgerCells {
	c := &ledgerCells{State: "not_checked", Text: "not yet checked"}
	switch {
	case l.LastLoss != nil && (now.Sub(l.LastLoss.At) <= window || l.Intact() == 0):
		c.State, c.Text = "loss", "write lost" // recent, or nothing ever read back intact
	case l.Intact() > 0:
		c.State, c.Text = "intact", "intact"
	}
	esc := template.HTMLEscapeString
	var b strings.Builder
	b.WriteString(`<span class="ledger-held">`)
	b.WriteString(strconv.Itoa(l.Entries))
	b.WriteString(" acknowledged writes held")
	if l.Entries > 0 {
		b.WriteString(", oldest " + strings.TrimSuffix(relative(l.OldestEntryAge), " ago"))
	}
	b.WriteString(" (at most " + strconv.Itoa(l.MaxEntries) + ")</span>; checks since start:")
	for i, a := range l.Checks {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(` <span class="ledger-age">at ` + esc(a.Age) + `: ` + strconv.FormatUint(a.Intact, 10) + ` intact`)
		if a.Missing > 0 {
			b.WriteString(` <span class="cause">` + strconv.FormatUint(a.Missing, 10) + ` missing</span>`)
		}
		if a.Corrupted > 0 {
			b.WriteString(` <span class="cause">` + strconv.FormatUint(a.Corrupted, 10) + ` corrupted</span>`)
		}
		b.WriteString(`</span>`)
	}
	if l.LastIntact.IsZero() {
		b.WriteString(`; last intact check: <span class="muted">never</span>`)
	} else {
		b.WriteString(`; last intact check ` + string(ago(now, l.LastIntact)))
	}
	b.WriteString(".")
	if ll := l.LastLoss; ll != nil {
		b.WriteString(` <span class="ledger-loss">Last loss ` + string(stamp(now, ll.At)) + `: <code>` + esc(ll.Where+" "+ll.Key) +
			`</code>, acknowledged ` + string(stamp(now, ll.Acked)))
		if ll.Setting != "" {
			b.WriteString(" (" + esc(ll.Setting) + ")")
		}
		b.WriteString(`, <span class="cause">` + esc(string(ll.Result)) + `</span> at the ` + esc(ll.Age) + ` check.</span>`)
	}
	if l.InMemory {
		b.WriteString(` <span class="muted">Kept in memory (no global.state_dir): a restart forgets it.</span>`)
	} else {
		b.WriteString(` <span class="muted">Kept in <code>` + esc(l.File) + `</code>.</span>`)
	}
	c.Detail = template.HTML(b.String())
	return c
}

// failures renders "failed / runs" and the count per cause.
func failures(o status.OpStatus) template.HTML {
	s := strconv.FormatUint(o.Failures, 10) + " / " + strconv.FormatUint(o.Runs, 10)
	for _, c := range o.Causes {
		// Causes in the window come from the fixed probes.Causes set: no escaping needed.
		s += ` <span class="cause">` + template.HTMLEscapeString(string(c.Cause)) + " " + strconv.FormatUint(c.Count, 10) + `</span>`
	}
	return template.HTML(s)
}

func (p *statusPage) json(w http.ResponseWriter, r *http.Request) {
	if !allowGet(w, r) {
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); bufPool.Put(buf) }()
	if err := json.NewEncoder(buf).Encode(p.store.Snapshot()); err != nil {
		p.logger.Error("encoding status.json", "err", err)
		http.Error(w, "cannot encode the status", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	setCommonHeaders(h, buf.Len())
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

func allowGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "Only GET and HEAD requests allowed", http.StatusMethodNotAllowed)
	return false
}

func setCommonHeaders(h http.Header, n int) {
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(n))
}

func minutes(d time.Duration) string { return fmt.Sprintf("%g min", d.Minutes()) }

func stateText(s status.State) string { return strings.ReplaceAll(string(s), "_", " ") }

// ago renders t as "4m12s ago" with the exact UTC instant as its tooltip.
// It returns HTML: its only inputs are formatted times, never text from outside.
func ago(now, t time.Time) template.HTML {
	if t.IsZero() {
		return `<span class="muted">never</span>`
	}
	iso := t.UTC().Format(time.RFC3339)
	return template.HTML(`<time datetime="` + iso + `" title="` + iso + `">` + relative(now.Sub(t)) + `</time>`)
}

// stamp renders t as a UTC time of day (with the date if not today) and its age as tooltip.
func stamp(now, t time.Time) template.HTML {
	if t.IsZero() {
		return `<span class="muted">never</span>`
	}
	u := t.UTC()
	layout := "15:04:05"
	if y, m, d := u.Date(); y != now.UTC().Year() || m != now.UTC().Month() || d != now.UTC().Day() {
		layout = "Jan 2 15:04:05"
	}
	iso := u.Format(time.RFC3339Nano)
	return template.HTML(`<time datetime="` + iso + `" title="` + iso + ` (` + relative(now.Sub(t)) + `)">` + u.Format(layout) + `</time>`)
}

// relative says how long ago an age was, to the second.
func relative(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s ago"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds ago", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d ago"
}

// dur renders a latency with three significant digits.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + " µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + " ms"
	}
	return sig3(d.Seconds()) + " s"
}

func sig3(v float64) string {
	switch {
	case v >= 99.95:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 9.995:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
