//go:build integration

package cassandra_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
)

// TestWrongPassword: a bad password gives cause auth and target_up 0 while
// metrics keep being gathered, and the password never shows in the error.
func TestWrongPassword(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("not-the-password-7f3a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cass := strings.Replace(section(t, "dbcanary_it", ""), "password_file: "+env.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"), "password_file: "+pwFile, 1)
	h := enginetest.Start(t, engineConfig("auth", "cass-badpw", "insert: {rate: 5}\nread: {rate: 5}", cass))
	enginetest.WaitFor(t, 60*time.Second, "auth failures", func() bool { return failures(t, h, "cass-badpw", "auth") >= 2 })
	if v := h.Value(t, "dbcanary_target_up", enginetest.L{"target": "cass-badpw"}); v != 0 {
		t.Errorf("target_up = %v, want 0", v)
	}
	if n := okCount(t, h, "cass-badpw", "insert"); n != 0 {
		t.Errorf("%d inserts succeeded with a wrong password", n)
	}
	if _, err := h.Registry.Gather(); err != nil {
		t.Errorf("metrics not served: %v", err)
	}

	p := newProbe(t, "auth", cass)
	err := prepare(t, p)
	if probes.CauseOf(err) != probes.CauseAuth {
		t.Fatalf("Prepare: cause %q (%v), want auth", probes.CauseOf(err), err)
	}
	if strings.Contains(err.Error(), "not-the-password") {
		t.Errorf("error shows the password: %v", err)
	}
	t.Logf("wrong password: %v", err)
}

// TestLeastPrivilege: a role without CREATE gets the missing grant and the
// CQL to pre-create the keyspace and table, with cause setup (it logged in:
// a missing GRANT is a setup mistake, not bad credentials); with SELECT and
// MODIFY on a pre-created keyspace and table it works, and without MODIFY
// its writes fail with cause setup too.
func TestLeastPrivilege(t *testing.T) {
	a := admin(t)
	mustExec(t, a, `DROP KEYSPACE IF EXISTS dbcanary_lp`)
	mustExec(t, a, `DROP ROLE IF EXISTS canary_lp`)
	mustExec(t, a, `CREATE ROLE canary_lp WITH LOGIN = true AND PASSWORD = 'lp-secret-91'`)
	t.Cleanup(func() { _ = a.Query(`DROP ROLE IF EXISTS canary_lp`).Exec() })
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("lp-secret-91"), 0o600); err != nil {
		t.Fatal(err)
	}
	cass := section(t, "dbcanary_lp", "")
	cass = strings.Replace(cass, "password_file: "+env.Get(t, "DBCANARY_TEST_CASSANDRA_PASSWORD_FILE"), "password_file: "+pwFile, 1)
	cass = strings.Replace(cass, "username: "+env.Get(t, "DBCANARY_TEST_CASSANDRA_USER"), "username: canary_lp", 1)

	p := newProbe(t, "lp", cass)
	err := prepare(t, p)
	if probes.CauseOf(err) != probes.CauseSetup {
		t.Fatalf("Prepare without CREATE: cause %q (%v), want setup", probes.CauseOf(err), err)
	}
	for _, want := range []string{"missing grant: CREATE ON ALL KEYSPACES", "CREATE KEYSPACE IF NOT EXISTS dbcanary_lp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};", "GRANT CREATE, SELECT, MODIFY ON KEYSPACE dbcanary_lp TO canary_lp"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	t.Logf("no CREATE on keyspaces: %v", err)

	// The keyspace exists, the role may not create tables in it.
	mustExec(t, a, `CREATE KEYSPACE dbcanary_lp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
	mustExec(t, a, `GRANT SELECT, MODIFY ON KEYSPACE dbcanary_lp TO canary_lp`)
	err = prepare(t, p)
	if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), "missing grant: CREATE ON KEYSPACE dbcanary_lp") ||
		!strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS dbcanary_lp.mixed_workload (key uuid PRIMARY KEY, a blob, b blob) WITH default_time_to_live = 3600;") {
		t.Fatalf("Prepare without CREATE on the keyspace: cause %q, error:\n%v", probes.CauseOf(err), err)
	}
	t.Logf("no CREATE on the keyspace: %v", err)

	// Pre-created by an administrator, as the message says: SELECT and MODIFY suffice.
	mustExec(t, a, `CREATE TABLE dbcanary_lp.mixed_workload (key uuid PRIMARY KEY, a blob, b blob) WITH default_time_to_live = 3600`)
	if err := prepare(t, p); err != nil {
		t.Fatalf("Prepare with SELECT, MODIFY on a pre-created keyspace: %v", err)
	}
	for _, op := range []string{"insert", "read", "read_miss"} {
		if err := run(t, p, op); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	if strings.Contains(err.Error(), "lp-secret-91") {
		t.Error("an error shows the password")
	}

	mustExec(t, a, `REVOKE MODIFY ON KEYSPACE dbcanary_lp FROM canary_lp`)
	enginetest.WaitFor(t, 10*time.Second, "the revoked grant to apply (permissions are cached)", func() bool {
		err = run(t, p, "insert")
		return err != nil
	})
	if probes.CauseOf(err) != probes.CauseSetup || !strings.Contains(err.Error(), "lacks a grant (needs: GRANT SELECT, MODIFY ON KEYSPACE dbcanary_lp TO canary_lp;)") {
		t.Fatalf("insert without MODIFY: cause %q: %v", probes.CauseOf(err), err)
	}
}
