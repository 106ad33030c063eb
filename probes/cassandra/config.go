package cassandra

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// Config is the `cassandra:` section of a target.
type Config struct {
	// Hosts are the contact points, host or host:port; the rest of the ring is discovered.
	Hosts []string `yaml:"hosts"`
	// Port is the CQL native port used for hosts given without one.
	Port int `yaml:"port"`
	// LocalDC makes routing DC-aware: requests go to replicas in this data centre.
	LocalDC string `yaml:"local_dc"`
	// PinHosts makes the listed hosts the only coordinators: the driver
	// still reads the ring's metadata but sends every request to a listed
	// host. One target per node (each with pin_hosts and that node alone
	// in hosts) shows each coordinator's latency and errors apart
	// (docs/clusters.md, "Which node").
	PinHosts bool `yaml:"pin_hosts"`
	// ClientAuth: username (PasswordAuthenticator; empty means no
	// authentication), password_file or password_env, tls, and
	// connect_timeout, which bounds dialling, the TLS handshake and authentication.
	probes.ClientAuth `yaml:",inline"`
	// RequestTimeout is the driver's per-request timeout; the op timeout of
	// the target (timeout:, ops.<op>.timeout) also bounds every op.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// ReconnectInterval is how often nodes marked down are redialled.
	ReconnectInterval time.Duration `yaml:"reconnect_interval"`

	// Keyspace is the canary's own keyspace, created if absent.
	Keyspace    string      `yaml:"keyspace"`
	Replication Replication `yaml:"replication"`
	// TTL is the tables' default_time_to_live, and every write carries it.
	TTL time.Duration `yaml:"ttl"`
	// Profile is mixed_workload or ycsb_a.
	Profile string `yaml:"profile"`
	// Consistency maps an op name to its consistency level (default
	// LOCAL_QUORUM: reads overlap writes, so a missing or different row is
	// data loss). Levels whose reads may miss writes (R + W <= RF) draw a
	// warning, and a read they explain is cause stale.
	Consistency map[string]string `yaml:"consistency"`
	// ReadMinAge keeps reads off rows written more recently than this. Only
	// useful with weak levels (fewer stale reads); 0 by default.
	ReadMinAge time.Duration `yaml:"read_min_age"`

	MixedWorkload MixedConfig `yaml:"mixed_workload"`
	YCSBA         YCSBConfig  `yaml:"ycsb_a"`
	// Ledger configures the durability ledger (ledger.go); its ages are
	// bounded by the ttl.
	Ledger probes.LedgerConfig `yaml:"ledger"`

	// kv shapes the kv table (profileKV): set by the bench profiles only, never from YAML.
	kv kvConfig
}

// Replication is the canary keyspace's replication, used only when creating it.
type Replication struct {
	// Class is SimpleStrategy or NetworkTopologyStrategy.
	Class string `yaml:"class"`
	// ReplicationFactor is SimpleStrategy's factor.
	ReplicationFactor int `yaml:"replication_factor"`
	// Datacenters is NetworkTopologyStrategy's factor per data centre.
	Datacenters map[string]int `yaml:"datacenters"`
}

// MixedConfig is the mixed_workload profile (cassandra-stress).
type MixedConfig struct {
	// ASize and BSize are the uniform size ranges of the two blobs, in bytes.
	ASize SizeRange `yaml:"a_size"`
	BSize SizeRange `yaml:"b_size"`
	// RecentKeys bounds the ring of keys written by this instance that reads pick from.
	RecentKeys int `yaml:"recent_keys"`
}

// rowBytes is the mean size of a row's two blobs.
func (m MixedConfig) rowBytes() float64 {
	return float64(m.ASize.Min+m.ASize.Max)/2 + float64(m.BSize.Min+m.BSize.Max)/2
}

// SizeRange is a uniform size distribution, both ends included.
type SizeRange struct {
	Min int `yaml:"min"`
	Max int `yaml:"max"`
}

// YCSBConfig is the ycsb_a profile (YCSB core workload A).
type YCSBConfig struct {
	// RecordCount bounds the key space: y_id is <instance>-<0..record_count-1>.
	RecordCount int `yaml:"record_count"`
	// FieldLength is the size of each of the 10 fields, in bytes.
	FieldLength int `yaml:"field_length"`
}

// Profiles and op names.
const (
	ProfileMixed = "mixed_workload"
	ProfileYCSBA = "ycsb_a"

	OpInsert   = "insert"
	OpRead     = "read"
	OpReadMiss = "read_miss"
	OpUpdate   = "update"
)

// DefaultConfig holds the defaults. Maps stay nil here: YAML decoding merges
// into an existing map, which would share it between targets.
var DefaultConfig = Config{
	Port:              9042,
	ClientAuth:        probes.ClientAuth{ConnectTimeout: 5 * time.Second},
	RequestTimeout:    5 * time.Second,
	ReconnectInterval: 2 * time.Second,
	Keyspace:          "dbcanary",
	Replication:       Replication{Class: "SimpleStrategy", ReplicationFactor: 3},
	TTL:               time.Hour,
	Profile:           ProfileMixed,
	MixedWorkload: MixedConfig{
		ASize:      SizeRange{Min: 1, Max: 10000},
		BSize:      SizeRange{Min: 1, Max: 100000},
		RecentKeys: 1000,
	},
	YCSBA: YCSBConfig{RecordCount: 1000, FieldLength: 100},
}

var (
	keyspaceRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
	dcRE       = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// authRules: a username needs a password and a password a username.
var authRules = probes.AuthRules{NoUsername: "missing: password_file or password_env is set but no username", ShowTimeout: true}

// maxTTL is Cassandra's limit for a TTL (20 years).
const maxTTL = 630720000 * time.Second

// Validate implements probes.Config.
func (c *Config) Validate() []error {
	var errs []error
	if len(c.Hosts) == 0 {
		errs = append(errs, probes.Invalid("hosts", "missing: list at least one contact point (host or host:port)"))
	}
	for i, h := range c.Hosts {
		if err := checkHost(h); err != nil {
			errs = append(errs, probes.Invalid(fmt.Sprintf("hosts[%d]", i), "%v", err))
		}
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, probes.Invalid("port", "must be between 1 and 65535, got %d", c.Port))
	}
	if c.LocalDC != "" && !dcRE.MatchString(c.LocalDC) {
		errs = append(errs, probes.Invalid("local_dc", "%q is not a data centre name", c.LocalDC))
	}
	errs = append(errs, c.ClientAuth.Validate(authRules)...)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"request_timeout", c.RequestTimeout}, {"reconnect_interval", c.ReconnectInterval}} {
		if d.v <= 0 {
			errs = append(errs, probes.Invalid(d.name, "must be positive, got %s", d.v))
		}
	}
	switch {
	case !keyspaceRE.MatchString(c.Keyspace):
		errs = append(errs, probes.Invalid("keyspace", "%q must be 1-48 lowercase letters, digits or '_', starting with a letter", c.Keyspace))
	case c.Keyspace == "system" || strings.HasPrefix(c.Keyspace, "system_"):
		errs = append(errs, probes.Invalid("keyspace", "%q is a Cassandra system keyspace: the canary only writes its own keyspace", c.Keyspace))
	}
	errs = append(errs, c.Replication.validate()...)
	if c.TTL < 10*time.Second || c.TTL > maxTTL || c.TTL%time.Second != 0 {
		errs = append(errs, probes.Invalid("ttl", "must be whole seconds between 10s and 20 years, got %s (it bounds the canary's footprint)", c.TTL))
	}
	if c.ReadMinAge < 0 || c.ReadMinAge >= c.TTL/2 {
		errs = append(errs, probes.Invalid("read_min_age", "must be between 0 and half the ttl, got %s", c.ReadMinAge))
	}
	ops := append(c.opNames(), probes.OpLedgerWrite, probes.OpLedgerCheck)
	switch c.Profile {
	case ProfileMixed:
		errs = append(errs, c.MixedWorkload.ASize.validate("mixed_workload.a_size")...)
		errs = append(errs, c.MixedWorkload.BSize.validate("mixed_workload.b_size")...)
		if c.MixedWorkload.RecentKeys < 1 || c.MixedWorkload.RecentKeys > 1000000 {
			errs = append(errs, probes.Invalid("mixed_workload.recent_keys", "must be between 1 and 1000000, got %d", c.MixedWorkload.RecentKeys))
		}
	case ProfileYCSBA:
		if c.YCSBA.RecordCount < 1 || c.YCSBA.RecordCount > 10000000 {
			errs = append(errs, probes.Invalid("ycsb_a.record_count", "must be between 1 and 10000000, got %d", c.YCSBA.RecordCount))
		}
		if c.YCSBA.FieldLength < 1 || c.YCSBA.FieldLength > 1<<20 {
			errs = append(errs, probes.Invalid("ycsb_a.field_length", "must be between 1 and 1048576 bytes, got %d", c.YCSBA.FieldLength))
		}
	default:
		errs = append(errs, probes.Invalid("profile", "must be %s or %s, got %q", ProfileMixed, ProfileYCSBA, c.Profile))
	}
	// The ledger's ages are bounded by a valid ttl; an invalid one is
	// reported once, above, not again through the ages derived from it.
	if c.TTL >= 10*time.Second && c.TTL <= maxTTL && c.TTL%time.Second == 0 {
		errs = append(errs, c.validateLedger()...)
	}
	for _, op := range slices.Sorted(maps.Keys(c.Consistency)) {
		if !slices.Contains(ops, op) {
			errs = append(errs, probes.Invalid("consistency."+op, "unknown op for profile %s (ops: %s)", c.Profile, strings.Join(ops, ", ")))
		}
		if _, err := parseConsistency(c.Consistency[op]); err != nil {
			errs = append(errs, probes.Invalid("consistency."+op, "%v", err))
		}
	}
	return errs
}

func (r *Replication) validate() []error {
	var errs []error
	switch r.Class {
	case "SimpleStrategy":
		if r.ReplicationFactor < 1 || r.ReplicationFactor > 100 {
			errs = append(errs, probes.Invalid("replication.replication_factor", "must be between 1 and 100, got %d", r.ReplicationFactor))
		}
		if len(r.Datacenters) > 0 {
			errs = append(errs, probes.Invalid("replication.datacenters", "only for NetworkTopologyStrategy"))
		}
	case "NetworkTopologyStrategy":
		if len(r.Datacenters) == 0 {
			errs = append(errs, probes.Invalid("replication.datacenters", "missing: NetworkTopologyStrategy needs a replication factor per data centre, e.g. {dc1: 3}"))
		}
		for _, dc := range slices.Sorted(maps.Keys(r.Datacenters)) {
			if !dcRE.MatchString(dc) {
				errs = append(errs, probes.Invalid("replication.datacenters", "%q is not a data centre name", dc))
			}
			if n := r.Datacenters[dc]; n < 1 || n > 100 {
				errs = append(errs, probes.Invalid("replication.datacenters."+dc, "must be between 1 and 100, got %d", n))
			}
		}
	default:
		errs = append(errs, probes.Invalid("replication.class", "must be SimpleStrategy or NetworkTopologyStrategy, got %q", r.Class))
	}
	return errs
}

// cql renders the replication map of CREATE KEYSPACE.
func (r *Replication) cql() string {
	if r.Class == "SimpleStrategy" {
		return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", r.ReplicationFactor)
	}
	var b strings.Builder
	b.WriteString("{'class': 'NetworkTopologyStrategy'")
	for _, dc := range slices.Sorted(maps.Keys(r.Datacenters)) {
		fmt.Fprintf(&b, ", '%s': %d", dc, r.Datacenters[dc])
	}
	b.WriteString("}")
	return b.String()
}

func (s SizeRange) validate(field string) []error {
	if s.Min < 1 || s.Max < s.Min || s.Max > 16<<20 {
		return []error{probes.Invalid(field, "need 1 <= min <= max <= 16777216 bytes, got min %d max %d", s.Min, s.Max)}
	}
	return nil
}

func checkHost(h string) error {
	if strings.Contains(h, "@") {
		// Never quote it: the part before @ may be user:password.
		return fmt.Errorf("a host must not contain credentials (user@ or user:password@): use username and password_file")
	}
	host := h
	if strings.Contains(h, ":") {
		hp, port, err := net.SplitHostPort(h)
		if err != nil {
			if net.ParseIP(h) != nil {
				return nil // a bare IPv6 address
			}
			return fmt.Errorf("%q is not host or host:port: %v", h, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port must be between 1 and 65535", h)
		}
		host = hp
	}
	if host == "" || strings.ContainsAny(host, "/@ ") {
		return fmt.Errorf("%q is not a host name or address", h)
	}
	return nil
}

// parseConsistency accepts the CQL names (ONE, LOCAL_QUORUM, ...) in any case.
func parseConsistency(s string) (gocql.Consistency, error) {
	c, err := gocql.ParseConsistencyWrapper(strings.ToUpper(strings.TrimSpace(s)))
	if err != nil {
		return 0, fmt.Errorf("%q is not a consistency level (ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM, LOCAL_ONE)", s)
	}
	if c == gocql.Serial || c == gocql.LocalSerial {
		return 0, fmt.Errorf("%s is only for lightweight transactions", s)
	}
	return c, nil
}

// DefaultConsistency is every op's level unless configured: with it, reads
// and writes overlap for any replication factor of the local data centre.
const DefaultConsistency = gocql.LocalQuorum

// consistency returns an op's consistency level.
func (c *Config) consistency(op string) gocql.Consistency {
	if s, ok := c.Consistency[op]; ok {
		if cl, err := parseConsistency(s); err == nil {
			return cl
		}
	}
	return DefaultConsistency
}

func (c *Config) opNames() []string {
	if c.Profile == profileKV {
		return []string{OpBatchInsert, OpInsert, OpRead}
	}
	if c.Profile == ProfileYCSBA {
		return []string{OpRead, OpUpdate}
	}
	return []string{OpInsert, OpRead, OpReadMiss}
}

// Ops implements probes.Config. Default rates encode the reference ratios:
// insert:read 1:4 (cassandra-stress mixed run), read:update 95:5 (YCSB A).
func (c *Config) Ops() []probes.OpSpec {
	if c.Profile == profileKV {
		return c.kvOps()
	}
	if c.Profile == ProfileYCSBA {
		return append([]probes.OpSpec{
			{Name: OpRead, DefaultRate: 0.95, Received: float64(10 * c.YCSBA.FieldLength), Help: "read a whole usertable row this instance wrote and compare the 10 fields byte for byte"},
			{Name: OpUpdate, DefaultRate: 0.05, Sent: float64(c.YCSBA.FieldLength), Help: "update one field of a usertable row of this instance (the whole row the first time)"},
		}, probes.LedgerSpecs()...)
	}
	return append([]probes.OpSpec{
		{Name: OpInsert, DefaultRate: 0.2, Sent: c.MixedWorkload.rowBytes(), Help: "insert a mixed_workload row (uuid key, blobs a and b of random sizes) with the table TTL"},
		{Name: OpRead, DefaultRate: 0.8, Received: c.MixedWorkload.rowBytes(), Help: "read a row this instance inserted recently and compare both blobs byte for byte"},
		{Name: OpReadMiss, DefaultRate: 0, Help: "read a key never written (expects no row): the missing half of a half-miss read mix"},
	}, probes.LedgerSpecs()...)
}

// Endpoints implements probes.Endpointer.
func (c *Config) Endpoints() []string { return c.Hosts }
