//go:build integration

package rabbitmq_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/internal/enginetest"
	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/rabbitmq"
)

// reports records the async samples a probe reports.
type reports struct {
	mu     sync.Mutex
	causes []probes.Cause
}

func (r *reports) Report(op string, intended, sent, done time.Time, out *probes.Outcome, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.causes = append(r.causes, probes.CauseOf(err))
}

func (r *reports) get() []probes.Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]probes.Cause(nil), r.causes...)
}

// directProbe builds a probe for the private broker as user/password.
func directProbe(t *testing.T, b *privateBroker, instance, user, password string, ephemeral bool) (*rabbitmq.Probe, *reports) {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	c := rabbitmq.DefaultConfig
	c.URL, c.Username, c.PasswordFile = b.env["DBCANARY_TEST_RABBITMQ_URL"], user, pw
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	r := &reports{}
	p, err := rabbitmq.New(probes.Target{Name: "perm", InstanceID: instance, Ephemeral: ephemeral, Config: &c, Logger: enginetest.Logger(), Report: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, r
}

func publish(t *testing.T, p *rabbitmq.Probe) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out probes.Outcome
	out.Reset(time.Now())
	return p.Run(ctx, rabbitmq.OpPublish, &out)
}

// TestMissingPermissionIsSetup: a user whose password is right but who lacks
// a permission the canary needs (the vhost, configure for the declare, write
// for the publish, read for the consume) fails with cause setup, and the
// consume op says so too; a wrong password stays auth.
func TestMissingPermissionIsSetup(t *testing.T) {
	b := startPrivateBroker(t)
	const user, password = "canary-perm", "perm-secret-5e1"
	b.ctl("add_user", user, password)
	cases := []struct {
		name                   string
		configure, write, read string // "": no permissions at all on the vhost
		want                   probes.Cause
		wantText               string
		password               string // default: the right one
	}{
		{name: "no vhost access", want: probes.CauseSetup, wantText: "may not use vhost"},
		{name: "no configure", configure: "^$", write: ".*", read: ".*", want: probes.CauseSetup, wantText: "may not declare queue"},
		{name: "no write", configure: ".*", write: "^$", read: ".*", want: probes.CauseSetup, wantText: "amq.default"},
		{name: "no read", configure: ".*", write: ".*", read: "^$", want: probes.CauseSetup, wantText: "may not consume"},
		{name: "wrong password", configure: ".*", write: ".*", read: ".*", want: probes.CauseAuth, password: "not-the-password"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.configure == "" {
				b.ctl("clear_permissions", "-p", "/", user)
			} else {
				b.ctl("set_permissions", "-p", "/", user, tc.configure, tc.write, tc.read)
			}
			pw := password
			if tc.password != "" {
				pw = tc.password
			}
			p, r := directProbe(t, b, "perm"+string(rune('a'+i)), user, pw, false)
			err := p.Prepare(context.Background())
			if tc.name == "no write" {
				// Declaring and consuming need no write permission: the publish is refused.
				if err != nil {
					t.Fatalf("prepare: %v", err)
				}
				err = publish(t, p)
			}
			if c := probes.CauseOf(err); c != tc.want {
				t.Fatalf("cause %q, want %q: %v", c, tc.want, err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error lacks %q: %v", tc.wantText, err)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error shows the password: %v", err)
			}
			t.Logf("%s: %v", tc.name, err)
			// The next publish fails the same way, and consume reports it too
			// unless its consumer works (no write permission only stops the publish).
			err = publish(t, p)
			if c := probes.CauseOf(err); c != tc.want {
				t.Fatalf("publish: cause %q, want %q: %v", c, tc.want, err)
			}
			got := r.get()
			if tc.name == "no write" {
				return
			}
			if len(got) == 0 || got[len(got)-1] != tc.want {
				t.Fatalf("consume reports %v, want a %s failure", got, tc.want)
			}
		})
	}
}

// TestEphemeralDeletesItsQueue: a one-shot run's probe deletes its queue at
// Close; a daemon's probe leaves it (queue_expires removes it if abandoned).
func TestEphemeralDeletesItsQueue(t *testing.T) {
	b := startPrivateBroker(t)
	pw, err := os.ReadFile(b.env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	user := b.env["DBCANARY_TEST_RABBITMQ_USER"]
	for _, ephemeral := range []bool{true, false} {
		instance := "keep"
		if ephemeral {
			instance = "once-1a2b3c"
		}
		p, _ := directProbe(t, b, instance, user, strings.TrimSpace(string(pw)), ephemeral)
		if err := publish(t, p); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.ctl("list_queues", "-q", "--no-table-headers", "name"), p.Queue()) {
			t.Fatalf("queue %s not declared", p.Queue())
		}
		if err := p.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		listed := strings.Contains(b.ctl("list_queues", "-q", "--no-table-headers", "name"), p.Queue())
		if listed == ephemeral {
			t.Errorf("ephemeral=%v: queue %s still there = %v", ephemeral, p.Queue(), listed)
		}
	}
}
