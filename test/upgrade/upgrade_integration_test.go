//go:build integration

package upgrade

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/test/stack"
)

// lastAge is the last age the ledgers of Cassandra, S3 and OpenSearch check
// at (10s, then 30s); RabbitMQ's has one age, 10s.
const lastAge = 30 * time.Second

// targets are the config's targets, one per backend, by backend.
var targets = map[string]string{"cassandra": "upg-cassandra", "rabbitmq": "upg-rabbitmq", "s3": "upg-s3", "opensearch": "upg-opensearch"}

// config is one target per backend, only the ledger's ops (a write every
// second), and the state directory, for both releases: an upgrade keeps the config.
func config(t *testing.T, instance, stateDir string) string {
	c, r, m, o := envs["cassandra"], envs["rabbitmq"], envs["minio"], envs["opensearch"]
	ops := `{"*": {rate: 0}, ledger_write: {rate: 1}, ledger_check: {rate: 2}}`
	mqOps := `{publish: {rate: 0}, ledger_write: {rate: 1}, ledger_check: {rate: 2}}` // consume takes no rate
	return fmt.Sprintf(`global: {instance_id: %s, state_dir: %s, timeout: 20s}
targets:
  - name: %s
    backend: cassandra
    ops: %s
    cassandra:
      hosts: [%q]
      port: %s
      local_dc: %s
      username: %s
      password_file: %s
      keyspace: dbcanary_upgrade
      replication: {class: SimpleStrategy, replication_factor: 1}
      ledger: {ages: [10s, 30s]}
  - name: %s
    backend: rabbitmq
    ops: %s
    rabbitmq:
      url: %s
      username: %s
      password_file: %s
      ledger: {ages: [10s]}
  - name: %s
    backend: s3
    ops: %s
    s3:
      endpoint: http://%s
      region: %s
      bucket: dbcanary-upgrade
      access_key_id_file: %s
      secret_access_key_file: %s
      ledger: {ages: [10s, 30s]}
  - name: %s
    backend: opensearch
    ops: %s
    opensearch:
      addresses: [%s]
      index_prefix: dbcanary-upgrade-
      replicas: 0
      ledger: {ages: [10s, 30s]}
`, instance, stateDir,
		targets["cassandra"], ops, c.Get(t, "DBCANARY_TEST_CASSANDRA_HOST"), c.Get(t, "DBCANARY_TEST_CASSANDRA_PORT"),
		c.Get(t, "DBCANARY_TEST_CASSANDRA_DC"), c.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), c.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"),
		targets["rabbitmq"], mqOps, r.Get(t, "DBCANARY_TEST_RABBITMQ_URL"), r.Get(t, "DBCANARY_TEST_RABBITMQ_USER"), r.Get(t, "DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"),
		targets["s3"], ops, m.Get(t, "DBCANARY_TEST_S3_ENDPOINT"), m.Get(t, "DBCANARY_TEST_S3_REGION"),
		m.Get(t, "DBCANARY_TEST_S3_ACCESS_KEY_FILE"), m.Get(t, "DBCANARY_TEST_S3_SECRET_KEY_FILE"),
		targets["opensearch"], ops, o.Get(t, "DBCANARY_TEST_OPENSEARCH_URL"))
}

// TestUpgradeKeepsLedger runs the previous release, stops it (SIGTERM; kill
// -9 in the second case, at the same time on instances of their own) and
// starts this tree's binary with the same config on the same state
// directory: every state file is read, no ledger starts afresh or forgets,
// the ages already checked are kept, every write the previous release
// recorded is read back intact by the new binary, and nothing is reported lost.
func TestUpgradeKeepsLedger(t *testing.T) {
	if oldBinary == "" {
		t.Skip(skipped)
	}
	for _, c := range []struct {
		name, instance string
		sig            syscall.Signal
	}{{"SIGTERM", "upgrade-term", syscall.SIGTERM}, {"kill -9", "upgrade-kill", syscall.SIGKILL}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			upgrade(t, c.name, c.instance, c.sig)
		})
	}
}

// upgrade is one case: the previous release until its ledgers hold entries
// already checked at an age, the stop, the new binary until it has read back
// every entry the previous release left.
func upgrade(t *testing.T, name, instance string, sig syscall.Signal) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dbcanary.yaml")
	state := filepath.Join(dir, "state")
	if err := os.WriteFile(cfg, []byte(config(t, instance, state)), 0o600); err != nil {
		t.Fatal(err)
	}
	old := stack.StartDaemon(t, oldBinary, cfg, stack.DaemonOptions{})
	waitHistory(t, old)
	t0 := time.Now()
	stop(t, old, sig)
	before, temporary := stateFiles(t, state)
	if len(before) != len(targets) {
		t.Fatalf("the previous release left %d ledger files, want %d: %v", len(before), len(targets), keys(before))
	}
	if sig == syscall.SIGKILL && len(temporary) == 0 {
		temporary = append(temporary, plantCutSave(t, state, keys(before)[0]))
	}
	d := stack.StartDaemon(t, newBinary, cfg, stack.DaemonOptions{Args: []string{"--log.format", "json"}})
	down := time.Since(t0)
	resolved := readBack(t, d, state, before)
	if resolved.carried == 0 {
		t.Error("no entry the previous release left had an age checked already: the history check proved nothing")
	}
	loaded := checkLog(t, d, state, before)
	checkedAtLastAge(t, scrape(t, d), before)
	// The new binary saves all the time: only the previous release's temporary files must be gone.
	for _, name := range temporary {
		if _, err := os.Stat(filepath.Join(state, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, the temporary file of a save the kill -9 cut short, is still there after the new binary's start (%v)", name, err)
		}
	}
	if t.Failed() {
		return
	}
	stack.Figure(t, "upgrade %s -> this tree, %s: %d ledger files read (%s), %d entries of the previous release read back intact by the new binary (%d already checked at 10s kept their age), 0 missing, 0 corrupted, %d temporary file(s) of a save cut short removed; down %s",
		previousRelease[:7], name, len(before), loaded, resolved.total, resolved.carried, len(temporary), down.Round(100*time.Millisecond))
}

// checkedAtLastAge: an entry leaves the ledger once read back intact at its
// last age, so the new binary counted at least as many such checks per target
// as the previous release left entries (its own writes may add more), and no loss.
func checkedAtLastAge(t *testing.T, fams map[string]*dto.MetricFamily, before map[string]ledgerFile) {
	t.Helper()
	for name, f := range before {
		last := probes.AgeLabel(lastAge)
		if f.Backend == "rabbitmq" {
			last = "10s"
		}
		intact := sum(fams, "dbcanary_ledger_checks_total", map[string]string{"target": f.Target, "age": last, "result": "intact"})
		if intact < float64(len(f.Entries)) {
			t.Errorf("%s: the new binary read back %g entries intact at %s, the previous release left %d", name, intact, last, len(f.Entries))
		}
		if lost := losses(fams, f.Target); lost > 0 {
			t.Errorf("%s: the new binary reported %g losses on a healthy store", name, lost)
		}
	}
}

// waitHistory waits until each ledger of the previous release has entries
// and has read some back intact (Cassandra, S3 and OpenSearch: at 10s, so
// their file holds entries whose first age is done), with no loss.
func waitHistory(t *testing.T, d *stack.Daemon) {
	t.Helper()
	enginetest.WaitFor(t, 3*time.Minute, "the previous release's ledgers to hold entries and have read 2 back intact", func() bool {
		fams := scrape(t, d)
		ready := true
		for _, tg := range targets {
			if lost := losses(fams, tg); lost > 0 {
				t.Fatalf("the previous release reported %g losses on %s (a healthy store)", lost, tg)
			}
			intact := sum(fams, "dbcanary_ledger_checks_total", map[string]string{"target": tg, "result": "intact", "age": "10s"})
			entries := sum(fams, "dbcanary_ledger_entries", map[string]string{"target": tg})
			ready = ready && intact >= 2 && entries >= 3
		}
		return ready
	})
}

// stop ends the previous release with sig and waits until it is gone.
func stop(t *testing.T, d *stack.Daemon, sig syscall.Signal) {
	t.Helper()
	pid := d.Cmd.Process.Pid
	if sig == syscall.SIGKILL {
		stack.Kill9(t, pid, "the previous release")
		return
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 60*time.Second, "the previous release to exit after "+sig.String(), func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// plantCutSave writes what a kill -9 during a save of the named ledger file
// leaves when the kill did not (it lands in a save by chance): the temporary
// file, half written. It returns its name.
func plantCutSave(t *testing.T, state, ledger string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, ledger))
	if err != nil {
		t.Fatal(err)
	}
	name := ledger + ".tmp4242424242"
	if err := os.WriteFile(filepath.Join(state, name), b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// keys lists a map's keys, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// readBackResult counts the previous release's entries the new binary
// resolved, and how many of them had an age already checked.
type readBackResult struct{ total, carried int }

// readBack polls the ledger files the new binary writes until no entry of
// the previous release is left in them: each was read back at its last age.
// Meanwhile an entry's checked age never goes back (history kept), and the
// new binary's checks find nothing lost.
func readBack(t *testing.T, d *stack.Daemon, state string, before map[string]ledgerFile) readBackResult {
	t.Helper()
	var r readBackResult
	for _, f := range before {
		for _, e := range f.Entries {
			r.total++
			if e.Checked > 0 {
				r.carried++
			}
		}
	}
	enginetest.WaitFor(t, lastAge+3*time.Minute, "the new binary to read back every entry of the previous release", func() bool {
		now, _ := stateFiles(t, state)
		left := 0
		for name, f := range before {
			cur := now[name].checked()
			for key, was := range f.checked() {
				is, ok := cur[key]
				if ok && is < was {
					t.Fatalf("%s: entry %s was checked at %s by the previous release, the new binary's file says %s: history lost", name, key, was, is)
				}
				if ok {
					left++
				}
			}
		}
		fams := scrape(t, d)
		for _, tg := range targets {
			if lost := losses(fams, tg); lost > 0 {
				t.Fatalf("the new binary reported %g losses on %s (a healthy store)", lost, tg)
			}
		}
		return left == 0
	})
	return r
}

// checkLog checks the new binary's log: each ledger file of the previous
// release loaded with all its entries, none started afresh, nothing
// forgotten. It returns "target N" per file.
func checkLog(t *testing.T, d *stack.Daemon, state string, before map[string]ledgerFile) string {
	t.Helper()
	lines := logLines(t, d.Log.String())
	var loaded []string
	for _, name := range keys(before) {
		path, want := filepath.Join(state, name), len(before[name].Entries)
		found := false
		for _, l := range lines {
			if str(l, "msg") == "durability ledger loaded" && str(l, "ledger") == path {
				found = true
				if got := str(l, "entries"); got != fmt.Sprint(want) {
					t.Errorf("%s: the new binary loaded %s entries, the previous release left %d", name, got, want)
				}
			}
		}
		if !found {
			t.Errorf("%s: the new binary never logged it loaded (durability ledger loaded, ledger=%s)", name, path)
		}
		loaded = append(loaded, fmt.Sprintf("%s %d", before[name].Backend, want))
	}
	for _, l := range lines {
		msg := strings.ToLower(str(l, "msg"))
		if strings.Contains(msg, "fresh one") || strings.Contains(msg, "forget") || strings.Contains(msg, "forgot") {
			t.Errorf("the new binary dropped ledger history: %v", l)
		}
	}
	return strings.Join(loaded, ", ")
}
