//go:build integration

package statuspage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/crypto/bcrypt"

	"github.com/dbcanary/dbcanary/internal/status"
	"github.com/dbcanary/dbcanary/test/stack"
)

var (
	envs      = map[string]stack.Env{}
	chromium  string // the browser binary
	daemonBin string // the dbcanary binary under test
	artefacts string // where screenshots and DOM dumps are kept
)

func TestMain(m *testing.M) {
	for _, s := range []string{"minio", "cassandra", "opensearch"} {
		envs[s] = stack.Must(s)
	}
	chromium = stack.MustTool("chromium")
	// The real binary, with version information as `make build` sets it.
	rev, _ := exec.Command("git", "-C", stack.RepoRoot(), "rev-parse", "--short", "HEAD").Output()
	var remove func()
	daemonBin, remove = stack.MustBuild("dbcanary-statuspage-bin-", "-trimpath", "-ldflags",
		"-X github.com/prometheus/common/version.Version=statuspage-test"+
			" -X github.com/prometheus/common/version.Revision="+strings.TrimSpace(string(rev))+
			" -X github.com/prometheus/common/version.Branch=main")
	artefacts = stack.MustArtefactDir("statuspage")
	fmt.Fprintf(os.Stderr, "statuspage: screenshots and DOM dumps go to %s\n", artefacts)
	stack.Exit(m.Run(), remove)
}

// broker is a RabbitMQ node of this test's own (own node name, ports and
// directory), so stopping it disturbs no other test using the shared one.
type broker struct {
	env      []string
	port     int
	password string
	pwFile   string
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	dir := filepath.Join(stack.DataDir(), "statuspage")
	b := &broker{port: stack.FreePort(t)}
	b.env = append(os.Environ(),
		"DBCANARY_STACK_DIR="+dir,
		"DBCANARY_RABBITMQ_PORT="+strconv.Itoa(b.port),
		"DBCANARY_RABBITMQ_DIST_PORT="+strconv.Itoa(stack.FreePort(t)),
		"DBCANARY_RABBITMQ_NODENAME=dbcanary-statuspage@localhost")
	b.script(t, "stop") // a node a crashed run left behind
	t0 := time.Now()
	b.script(t, "start")
	t.Logf("own RabbitMQ on 127.0.0.1:%d ready in %s", b.port, time.Since(t0).Round(100*time.Millisecond))
	t.Cleanup(func() { b.script(t, "stop") })
	b.pwFile = filepath.Join(dir, "rabbitmq", "password")
	pw, err := os.ReadFile(b.pwFile)
	if err != nil {
		t.Fatal(err)
	}
	b.password = strings.TrimSpace(string(pw))
	return b
}

func (b *broker) script(t *testing.T, action string) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(stack.Dir(), "rabbitmq.sh"), action)
	cmd.Env = b.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rabbitmq.sh %s (own node): %v\n%s", action, err, out)
	}
}

// fixture is the config and the secrets it refers to.
type fixture struct {
	dir     string
	config  string
	secrets map[string]string // where -> value; none may reach the page
	env     []string          // the daemon's environment
}

func newFixture(t *testing.T, b *broker) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), secrets: map[string]string{}}
	// A password given through the environment: OpenSearch without its
	// security plugin ignores it, so the target still works.
	marker := "SECRETstatuspage" + randHex(t, 8)
	f.env = append(os.Environ(), "DBCANARY_STATUSPAGE_OS_PASSWORD="+marker)
	f.secrets["opensearch password (env)"] = marker
	f.secrets["rabbitmq password (file)"] = b.password
	s3 := envs["minio"]
	for what, key := range map[string]string{"s3 access key id (file)": "DBCANARY_TEST_S3_ACCESS_KEY_FILE", "s3 secret key (file)": "DBCANARY_TEST_S3_SECRET_KEY_FILE"} {
		v, err := os.ReadFile(s3.Get(t, key))
		if err != nil {
			t.Fatal(err)
		}
		f.secrets[what] = strings.TrimSpace(string(v))
	}
	// The stack's Cassandra keeps the default superuser password, "cassandra",
	// which is also the backend's name: it cannot be a marker.
	cass := envs["cassandra"]
	f.config = fmt.Sprintf(`global: {instance_id: statuspage, timeout: 5s}
targets:
  - name: mq-own
    backend: rabbitmq
    ops: {publish: {rate: 2}, consume: {}}
    rabbitmq:
      url: amqp://127.0.0.1:%d/
      username: dbcanary
      password_file: %s
      connect_timeout: 2s
  - name: cassandra-shared
    backend: cassandra
    timeout: 10s
    ops: {insert: {rate: 1}, read: {rate: 1}}
    cassandra:
      hosts: [%s]
      port: %s
      local_dc: %s
      username: %s
      password_file: %s
      keyspace: dbcanary_statuspage
      replication: {class: SimpleStrategy, replication_factor: 1}
      ttl: 1h
  - name: opensearch-shared
    backend: opensearch
    ops: {index: {rate: 1}, get: {rate: 1}, search_term: {rate: 0.5}}
    opensearch:
      addresses: [%s]
      username: dbcanary
      password_env: DBCANARY_STATUSPAGE_OS_PASSWORD
      replicas: 0
  - name: s3-shared
    backend: s3
    timeout: 30s
    ops: {put_4KiB: {rate: 1}, get_4KiB: {rate: 1}, ledger_write: {rate: 1}, ledger_check: {rate: 1}}
    s3:
      endpoint: http://%s
      region: %s
      bucket: dbcanary-statuspage
      ledger: {ages: [15s]}
      access_key_id_file: %s
      secret_access_key_file: %s
  - name: engine-overhead
    backend: noop
    ops: {noop: {rate: 5}}
    noop: {delay: 1ms}
`, b.port, b.pwFile,
		cass.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"), cass.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"), cass.Get(t, "DBCANARY_TEST_CASSANDRA_DC"),
		cass.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), cass.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"),
		envs["opensearch"].Get(t, "DBCANARY_TEST_OPENSEARCH_URL"),
		s3.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), s3.Get(t, "DBCANARY_TEST_S3_REGION"),
		s3.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), s3.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE"))
	return f
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeArtefact(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Error(err)
	}
}

// daemon is a running `dbcanary run`.
type daemon struct {
	base       string // http://127.0.0.1:PORT
	user, pass string // basic auth, if on
	log        *stack.Log
}

func startDaemon(t *testing.T, f *fixture, cfgPath string, args ...string) *daemon {
	t.Helper()
	sd := stack.StartDaemon(t, daemonBin, cfgPath, stack.DaemonOptions{
		Args: args, Env: f.env, NoWait: true,
		OnStop: func(log []byte) { writeArtefact(t, filepath.Join(artefacts, t.Name()+".daemon.log"), log) },
	})
	return &daemon{base: "http://" + sd.Addr, log: sd.Log}
}

func (d *daemon) get(t *testing.T, path string, auth bool) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth && d.user != "" {
		req.SetBasicAuth(d.user, d.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitStatus polls /status.json until cond holds.
func (d *daemon) waitStatus(t *testing.T, what string, timeout time.Duration, cond func(status.Snapshot) bool) status.Snapshot {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last status.Snapshot
	for {
		if code, body := d.get(t, "/status.json", true); code == 200 {
			last = status.Snapshot{}
			if err := json.Unmarshal(body, &last); err != nil {
				t.Fatalf("status.json: %v", err)
			}
			if cond(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(last, "", "  ")
			t.Fatalf("waiting %s for %s; last status:\n%s\ndaemon log:\n%s", timeout, what, b, d.log.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// allOK: every op of every target ran and its latest outcome succeeded, and
// the S3 target's durability ledger read acknowledged writes back intact.
func allOK(s status.Snapshot) bool {
	for _, t := range s.Targets {
		if t.State != status.StateOK {
			return false
		}
		if t.Name == ledgerTarget && (t.Ledger == nil || t.Ledger.Intact() < 3) {
			return false
		}
		for _, o := range t.Ops {
			if o.State != status.StateOK {
				return false
			}
		}
	}
	return len(s.Targets) > 0
}

// stoppedFailing: target is failing with cause refused (the broker is gone)
// with a few failures behind it; every other target is ok.
func stoppedFailing(target string) func(status.Snapshot) bool {
	return func(s status.Snapshot) bool {
		for _, t := range s.Targets {
			if t.Name != target {
				if t.State != status.StateOK {
					return false
				}
				continue
			}
			o := opNamed(t, "publish")
			if t.State != status.StateFailing || o.State != status.StateFailing || o.LastCause != "refused" || o.Failures < 3 || len(o.Errors) == 0 {
				return false
			}
		}
		return true
	}
}

func opNamed(t status.TargetStatus, name string) status.OpStatus {
	for _, o := range t.Ops {
		if o.Name == name {
			return o
		}
	}
	return status.OpStatus{}
}

// browse loads url in headless Chromium with a fresh profile and returns the
// DOM it rendered, kept as <test>-<label>.dom.html among the artefacts; with
// shot set it also saves a PNG screenshot as <test>-<label>.png and returns its path.
func browse(t *testing.T, url, label string, shot bool) (dom, shotPath string) {
	t.Helper()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1500,1150", "--hide-scrollbars"}
	run := func(extra ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, append(append(flags, extra...), url)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, errb.String())
		}
		return out.Bytes()
	}
	base := filepath.Join(artefacts, t.Name()+"-"+label)
	dom = string(run("--dump-dom"))
	writeArtefact(t, base+".dom.html", []byte(dom))
	if shot {
		shotPath = base + ".png"
		checkScreenshot(t, run, shotPath)
	}
	return dom, shotPath
}

// checkScreenshot takes a screenshot and checks the page's own stylesheet applied.
func checkScreenshot(t *testing.T, run func(...string) []byte, shot string) {
	t.Helper()
	run("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	// The header bar is styled by the page's own inline stylesheet: red
	// when a target fails. Unstyled (the CSP hash or the CSS broken), it is white.
	r, g, b, _ := img.At(4, 4).RGBA()
	if r>>8 < 150 || g>>8 > 80 || b>>8 > 80 {
		t.Errorf("screenshot %s: header pixel is rgb(%d,%d,%d), want the failing red: the stylesheet did not apply", shot, r>>8, g>>8, b>>8)
	}
	t.Logf("screenshot: %s", shot)
}

var tbodyRE = regexp.MustCompile(`(?s)<tbody class="target (\w+)" id="t-([^"]+)">(.*?)</tbody>`)

// checkPage asserts what the rendered DOM shows against the daemon's own JSON.
func checkPage(t *testing.T, dom string, snap status.Snapshot, stopped string, secrets map[string]string) {
	t.Helper()
	for what, v := range secrets {
		if v != "" && strings.Contains(dom, v) {
			t.Errorf("the rendered page shows the %s", what)
		}
	}
	if !strings.Contains(dom, `<meta http-equiv="refresh" content="15">`) {
		t.Error("the page does not refresh itself")
	}
	sections := map[string][2]string{}
	for _, m := range tbodyRE.FindAllStringSubmatch(dom, -1) {
		sections[m[2]] = [2]string{m[1], html.UnescapeString(m[3])}
	}
	if len(sections) != len(snap.Targets) {
		t.Errorf("the page shows %d targets, the daemon has %d", len(sections), len(snap.Targets))
	}
	for _, ts := range snap.Targets {
		sec, ok := sections[ts.Name]
		if !ok {
			t.Errorf("target %s is not on the page", ts.Name)
			continue
		}
		if ts.Namespace == "" {
			t.Errorf("target %s (%s) names no namespace: its probe lacks Namespace()", ts.Name, ts.Backend)
		}
		if !strings.Contains(sec[1], ts.Namespace) || !strings.Contains(sec[1], ts.Backend) {
			t.Errorf("target %s: namespace %q or backend not shown", ts.Name, ts.Namespace)
		}
		checkLedgerRow(t, ts, sec[1])
		checkNodes(t, ts, sec[1])
		if ts.Name != stopped {
			if sec[0] != "ok" || strings.Contains(sec[1], `class="state failing"`) {
				t.Errorf("target %s shows %s, want ok", ts.Name, sec[0])
			}
			for _, o := range ts.Ops {
				if !strings.Contains(sec[1], `data-op="`+o.Name+`"`) {
					t.Errorf("target %s: op %s not shown", ts.Name, o.Name)
				}
			}
			continue
		}
		o := opNamed(ts, "publish")
		want := []string{
			`<span class="state failing">failing</span> <span class="cause">refused</span>`,
			o.Errors[0].Message,
		}
		if sec[0] != "failing" {
			t.Errorf("stopped target %s shows %s, want failing", ts.Name, sec[0])
		}
		for _, w := range want {
			if !strings.Contains(sec[1], w) {
				t.Errorf("stopped target %s: the page lacks %q", ts.Name, w)
			}
		}
		if !regexp.MustCompile(`\d+ / \d+ <span class="cause">refused \d+</span>`).MatchString(sec[1]) {
			t.Errorf("stopped target %s: no failure count by cause", ts.Name)
		}
		if !regexp.MustCompile(`<li><time datetime="[^"]+" title="[^"]+">\d\d:\d\d:\d\d</time>( ×\d+)? <span class="cause">refused</span> <code>`).MatchString(sec[1]) {
			t.Errorf("stopped target %s: no timestamped error message", ts.Name)
		}
		if !strings.Contains(dom, `<h2>Why it is red</h2>`) || !strings.Contains(dom, `<a href="#t-`+stopped+`">`+stopped+`</a>`) {
			t.Errorf("the summary does not name %s", stopped)
		}
	}
	for _, w := range []string{`statuspage-test (revision `, `id="instance">statuspage<`, `not sharded`, `loaded `} {
		if !strings.Contains(dom, w) {
			t.Errorf("the header lacks %q", w)
		}
	}
}

// ledgerTarget runs the durability ledger in the fixture (ages 15s).
const ledgerTarget = "s3-shared"

// checkLedgerRow: the ledger target has its durability ledger row with the
// checks it made; no other target has one (their ledger ops are off).
func checkLedgerRow(t *testing.T, ts status.TargetStatus, sec string) {
	t.Helper()
	if ts.Name != ledgerTarget {
		if strings.Contains(sec, `<tr class="ledger`) {
			t.Errorf("target %s shows a durability ledger row, its ledger ops are off", ts.Name)
		}
		return
	}
	if ts.Ledger == nil {
		t.Errorf("status.json: %s has no ledger", ts.Name)
		return
	}
	if !regexp.MustCompile(`<td>durability ledger</td>\s*<td class="st"><span class="ledger-state (intact|loss)">`).MatchString(sec) ||
		!regexp.MustCompile(`\d+ acknowledged writes held`).MatchString(sec) ||
		!regexp.MustCompile(`at 15s: \d+ intact`).MatchString(sec) ||
		!strings.Contains(sec, "Kept in memory (no global.state_dir)") {
		t.Errorf("target %s: no durability ledger row with its checks:\n%s", ts.Name, sec)
	}
}

// deleteLedgerObject deletes the newest durability ledger object of the S3
// target behind the daemon's back (one its ledger holds and has not checked
// yet: ledger objects live 15 s) and returns its key.
func deleteLedgerObject(t *testing.T) string {
	t.Helper()
	mc := minioAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var newest minio.ObjectInfo
	for o := range mc.ListObjects(ctx, "dbcanary-statuspage", minio.ListObjectsOptions{Prefix: ledgerPrefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if o.LastModified.After(newest.LastModified) {
			newest = o
		}
	}
	if newest.Key == "" {
		t.Fatal("no durability ledger object to delete")
	}
	if err := mc.RemoveObject(ctx, "dbcanary-statuspage", newest.Key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	return newest.Key
}

// ledgerPrefix is where the S3 target's ledger objects live (docs/ledger.md).
const ledgerPrefix = "dbcanary/" + ledgerTarget + "/statuspage/ledger/"

// removeLedgerObjects removes what earlier runs' ledgers left (they outlive
// the daemon by design) so that every ledger object is this run's.
func removeLedgerObjects(t *testing.T) {
	t.Helper()
	mc := minioAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ok, err := mc.BucketExists(ctx, "dbcanary-statuspage"); err != nil || !ok {
		return
	}
	for o := range mc.ListObjects(ctx, "dbcanary-statuspage", minio.ListObjectsOptions{Prefix: ledgerPrefix, Recursive: true}) {
		if o.Err == nil {
			_ = mc.RemoveObject(ctx, "dbcanary-statuspage", o.Key, minio.RemoveObjectOptions{})
		}
	}
}

func minioAdmin(t *testing.T) *minio.Client {
	t.Helper()
	e := envs["minio"]
	read := func(key string) string {
		b, err := os.ReadFile(e.Get(t, key))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	mc, err := minio.New(e.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), &minio.Options{
		Creds: credentials.NewStaticV4(read("DBCANARY_TEST_S3_ACCESS_KEY_FILE"), read("DBCANARY_TEST_S3_SECRET_KEY_FILE"), ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestStatusPageInChromium: all ok, then the broker stops behind the daemon;
// then an S3 ledger object is deleted behind it and the page names the loss.
func TestStatusPageInChromium(t *testing.T) {
	b := startBroker(t)
	f := newFixture(t, b)
	cfg := filepath.Join(f.dir, "dbcanary.yaml")
	writeFile(t, cfg, f.config)
	removeLedgerObjects(t)
	t.Cleanup(func() { removeLedgerObjects(t) })
	d := startDaemon(t, f, cfg)

	snap := d.waitStatus(t, "every op of every target ok", 3*time.Minute, allOK)
	dom, _ := browse(t, d.base+"/", "all-ok", false)
	checkPage(t, dom, snap, "", f.secrets)
	if !strings.Contains(dom, fmt.Sprintf("All %d targets ok", len(snap.Targets))) {
		t.Error("the page does not say every target is ok")
	}

	b.script(t, "stop")
	snap = d.waitStatus(t, "mq-own failing with cause refused, the others ok", 90*time.Second, stoppedFailing("mq-own"))
	time.Sleep(3 * time.Second) // a few more failures: the "×N" folding shows
	dom, _ = browse(t, d.base+"/", "broker-stopped", true)
	checkPage(t, dom, snap, "mq-own", f.secrets)
	if !strings.Contains(dom, fmt.Sprintf("1 of %d targets failing", len(snap.Targets))) {
		t.Error("the header does not count the failing target")
	}

	// A rejected reload shows on the page with its reason; the config keeps running.
	writeFile(t, cfg, f.config+"    bogus_key: 1\n")
	req, _ := http.NewRequest(http.MethodPost, d.base+"/-/reload", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("reload of a bad config: %v %v", err, resp)
	}
	dom, _ = browse(t, d.base+"/", "reload-rejected", false)
	if !strings.Contains(dom, "last reload rejected") || !strings.Contains(dom, "bogus_key") || !strings.Contains(dom, "keeps running") {
		t.Error("the page does not show the rejected reload and its reason")
	}
	for what, v := range f.secrets {
		if strings.Contains(dom, v) {
			t.Errorf("after a rejected reload the page shows the %s", what)
		}
	}

	// An acknowledged write deleted behind the canary's back: the ledger's
	// next check at 15s finds it missing, and the page says so and stays red
	// after ledger_check is ok again.
	key := deleteLedgerObject(t)
	t.Logf("deleted ledger object %s", key)
	snap = d.waitStatus(t, "the S3 ledger reports the deleted object missing", 90*time.Second, func(s status.Snapshot) bool {
		for _, ts := range s.Targets {
			if ts.Name == ledgerTarget && ts.Ledger != nil && ts.Ledger.LastLoss != nil {
				return true
			}
		}
		return false
	})
	for _, ts := range snap.Targets {
		if ts.Name != ledgerTarget {
			continue
		}
		if ll := ts.Ledger.LastLoss; ll.Key != key || ll.Result != "missing" || ll.Age != "15s" || ts.Ledger.Losses() != 1 {
			t.Errorf("ledger loss %+v (losses %d), want %s missing at 15s, once", ll, ts.Ledger.Losses(), key)
		}
	}
	dom, shot := browse(t, d.base+"/", "ledger-loss", true)
	if os.Getenv("DBCANARY_UPDATE_SCREENSHOT") == "1" {
		png, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		writeArtefact(t, filepath.Join(stack.RepoRoot(), "docs", "status-page.png"), png)
		t.Log("docs/status-page.png updated")
	}
	for _, w := range []string{
		`<span class="ledger-state loss">write lost</span>`,
		`durability ledger: 1 target lost an acknowledged write in the last 10 min`,
		`<a href="#t-` + ledgerTarget + `">` + ledgerTarget + `</a> durability ledger: <span class="cause">missing</span>`,
		`<code>s3://dbcanary-statuspage ` + key + `</code>`,
		`<span class="cause">1 missing</span>`,
		`<tbody class="target failing" id="t-` + ledgerTarget + `">`,
	} {
		if !strings.Contains(dom, w) {
			t.Errorf("the page after the ledger loss lacks %q", w)
		}
	}
	for what, v := range f.secrets {
		if strings.Contains(dom, v) {
			t.Errorf("after the ledger loss the page shows the %s", what)
		}
	}
}

// TestStatusPageBasicAuth: the page and its JSON are behind the same basic
// auth as /metrics; with credentials Chromium renders the same page.
func TestStatusPageBasicAuth(t *testing.T) {
	b := startBroker(t)
	f := newFixture(t, b)
	cfg := filepath.Join(f.dir, "dbcanary.yaml")
	writeFile(t, cfg, f.config)
	pass := "webpass" + randHex(t, 8)
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(f.dir, "web.yml")
	writeFile(t, webCfg, "basic_auth_users:\n  canary: "+string(hash)+"\n")
	f.secrets["web basic auth password"] = pass
	t.Cleanup(func() { removeLedgerObjects(t) })
	d := startDaemon(t, f, cfg, "--web.config.file", webCfg)
	d.user, d.pass = "canary", pass

	d.waitStatus(t, "every op of every target ok", 3*time.Minute, allOK)
	for _, p := range []string{"/", "/status.json", "/metrics"} {
		if code, _ := d.get(t, p, false); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", p, code)
		}
	}
	// Headless Chromium cannot answer the 401's challenge: it renders nothing.
	if dom, _ := browse(t, d.base+"/", "no-credentials", false); strings.Contains(dom, `id="targets"`) || strings.Contains(dom, "mq-own") {
		t.Errorf("Chromium without credentials was shown the status page:\n%.500s", dom)
	}

	b.script(t, "stop")
	snap := d.waitStatus(t, "mq-own failing with cause refused, the others ok", 90*time.Second, stoppedFailing("mq-own"))
	authURL := "http://" + d.user + ":" + d.pass + "@" + strings.TrimPrefix(d.base, "http://") + "/"
	dom, _ := browse(t, authURL, "broker-stopped", true)
	checkPage(t, dom, snap, "mq-own", f.secrets)
}

// checkNodes: a Cassandra, OpenSearch or RabbitMQ target lists its store's
// nodes under its namespace (dbcanary_store_node_up's view), every node
// named, a down one in the "node down" line.
func checkNodes(t *testing.T, ts status.TargetStatus, sec string) {
	t.Helper()
	switch ts.Backend {
	case "cassandra", "opensearch", "rabbitmq":
	default:
		if len(ts.Nodes) > 0 {
			t.Errorf("target %s (%s) lists nodes %v", ts.Name, ts.Backend, ts.Nodes)
		}
		return
	}
	if len(ts.Nodes) == 0 {
		t.Errorf("target %s (%s) lists no node in /status.json", ts.Name, ts.Backend)
		return
	}
	if !strings.Contains(sec, `class="nodes`) {
		t.Errorf("target %s: no nodes line on the page", ts.Name)
	}
	for _, n := range ts.Nodes {
		if !strings.Contains(sec, n.Node) {
			t.Errorf("target %s: node %s not on the page", ts.Name, n.Node)
		}
		if !n.Up && !strings.Contains(sec, "down: <code>"+n.Node+"</code>") {
			t.Errorf("target %s: node %s is down in /status.json, not on the page", ts.Name, n.Node)
		}
	}
}
