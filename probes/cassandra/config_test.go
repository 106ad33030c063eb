package cassandra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func validConfig() Config {
	c := DefaultConfig
	c.Hosts = []string{"127.0.0.1", "cass-2:9043", "::1"}
	return c
}

func TestValidateDefaults(t *testing.T) {
	c := validConfig()
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("defaults with hosts: %v", errs)
	}
	for _, op := range []string{OpInsert, OpRead, OpReadMiss, OpUpdate} {
		if got := c.consistency(op); got != gocql.LocalQuorum {
			t.Errorf("default consistency of %s = %v, want LOCAL_QUORUM", op, got)
		}
	}
	if c.ReadMinAge != 0 {
		t.Errorf("default read_min_age = %s, want 0 (reads overlap writes)", c.ReadMinAge)
	}
}

func TestValidateErrors(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"no hosts", func(c *Config) { c.Hosts = nil }, "hosts: missing: list at least one contact point"},
		{"bad host", func(c *Config) { c.Hosts = []string{"a b"} }, `hosts[0]: "a b" is not a host name or address`},
		{"bad host port", func(c *Config) { c.Hosts = []string{"h:99999"} }, `hosts[0]: "h:99999": port must be between 1 and 65535`},
		{"port", func(c *Config) { c.Port = 0 }, "port: must be between 1 and 65535, got 0"},
		{"user without password", func(c *Config) { c.Username = "canary" }, "password_file: a secret is required: set password_file or password_env"},
		{"password without user", func(c *Config) { c.PasswordFile = pw }, "username: missing: password_file or password_env is set but no username"},
		{"both secrets", func(c *Config) { c.Username, c.PasswordFile, c.PasswordEnv = "u", pw, "X" }, "password_file: set only one of password_file and password_env"},
		{"keyspace upper", func(c *Config) { c.Keyspace = "Canary" }, `keyspace: "Canary" must be 1-48 lowercase letters`},
		{"system keyspace", func(c *Config) { c.Keyspace = "system_auth" }, `keyspace: "system_auth" is a Cassandra system keyspace`},
		{"replication class", func(c *Config) { c.Replication.Class = "LocalStrategy" }, `replication.class: must be SimpleStrategy or NetworkTopologyStrategy, got "LocalStrategy"`},
		{"rf", func(c *Config) { c.Replication.ReplicationFactor = 0 }, "replication.replication_factor: must be between 1 and 100, got 0"},
		{"nts without dcs", func(c *Config) { c.Replication = Replication{Class: "NetworkTopologyStrategy"} }, "replication.datacenters: missing"},
		{"nts bad factor", func(c *Config) {
			c.Replication = Replication{Class: "NetworkTopologyStrategy", Datacenters: map[string]int{"dc1": 0}}
		}, "replication.datacenters.dc1: must be between 1 and 100, got 0"},
		{"ttl short", func(c *Config) { c.TTL = time.Second }, "ttl: must be whole seconds between 10s and 20 years, got 1s"},
		{"ttl fraction", func(c *Config) { c.TTL = 90500 * time.Millisecond }, "ttl: must be whole seconds"},
		{"read_min_age", func(c *Config) { c.ReadMinAge = time.Hour }, "read_min_age: must be between 0 and half the ttl, got 1h0m0s"},
		{"profile", func(c *Config) { c.Profile = "ycsb_b" }, `profile: must be mixed_workload or ycsb_a, got "ycsb_b"`},
		{"sizes", func(c *Config) { c.MixedWorkload.BSize = SizeRange{Min: 10, Max: 5} }, "mixed_workload.b_size: need 1 <= min <= max <= 16777216 bytes, got min 10 max 5"},
		{"ring", func(c *Config) { c.MixedWorkload.RecentKeys = 0 }, "mixed_workload.recent_keys: must be between 1 and 1000000, got 0"},
		{"records", func(c *Config) { c.Profile, c.YCSBA.RecordCount = ProfileYCSBA, 0 }, "ycsb_a.record_count: must be between 1 and 10000000, got 0"},
		{"consistency op", func(c *Config) { c.Consistency = map[string]string{"update": "ONE"} }, "consistency.update: unknown op for profile mixed_workload (ops: insert, read, read_miss, ledger_write, ledger_check)"},
		{"consistency level", func(c *Config) { c.Consistency = map[string]string{"read": "MOST"} }, `consistency.read: "MOST" is not a consistency level`},
		{"serial", func(c *Config) { c.Consistency = map[string]string{"read": "SERIAL"} }, "consistency.read: SERIAL is only for lightweight transactions"},
		{"timeout", func(c *Config) { c.ConnectTimeout = 0 }, "connect_timeout: must be positive, got 0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.modify(&c)
			var msgs []string
			for _, err := range c.Validate() {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("errors %q, want one containing %q", msgs, tc.want)
			}
			if strings.Contains(strings.Join(msgs, "\n"), "s3cret") {
				t.Errorf("an error shows the password")
			}
		})
	}
}

func TestConsistencyPerOp(t *testing.T) {
	c := validConfig()
	c.Profile = ProfileYCSBA
	c.Consistency = map[string]string{"read": "local_quorum", "update": " EACH_QUORUM "}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	if c.consistency(OpRead) != gocql.LocalQuorum || c.consistency(OpUpdate) != gocql.EachQuorum {
		t.Errorf("read %v update %v", c.consistency(OpRead), c.consistency(OpUpdate))
	}
}

func TestReplicationCQL(t *testing.T) {
	r := Replication{Class: "NetworkTopologyStrategy", Datacenters: map[string]int{"eu-west": 3, "dc1": 2}}
	if got, want := r.cql(), "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'eu-west': 3}"; got != want {
		t.Errorf("cql() = %s, want %s", got, want)
	}
	r = Replication{Class: "SimpleStrategy", ReplicationFactor: 3}
	if got, want := r.cql(), "{'class': 'SimpleStrategy', 'replication_factor': 3}"; got != want {
		t.Errorf("cql() = %s, want %s", got, want)
	}
}

func TestOpsPerProfile(t *testing.T) {
	c := validConfig()
	rates := map[string]float64{}
	for _, op := range c.Ops() {
		rates[op.Name] = op.DefaultRate
	}
	if rates[OpInsert] != 0.2 || rates[OpRead] != 0.8 || rates[OpReadMiss] != 0 || rates["ledger_write"] != 0.05 || rates["ledger_check"] != 0.1 || len(rates) != 5 {
		t.Errorf("mixed_workload default rates %v, want insert 0.2 read 0.8 read_miss 0 (1:4), ledger_write 0.05 ledger_check 0.1", rates)
	}
	c.Profile = ProfileYCSBA
	rates = map[string]float64{}
	for _, op := range c.Ops() {
		rates[op.Name] = op.DefaultRate
	}
	if rates[OpRead] != 0.95 || rates[OpUpdate] != 0.05 || rates["ledger_write"] != 0.05 || len(rates) != 4 {
		t.Errorf("ycsb_a default rates %v, want read 0.95 update 0.05 and the ledger's", rates)
	}
}
