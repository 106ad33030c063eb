package s3

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestDefaultOps(t *testing.T) {
	c := DefaultConfig
	var names []string
	for _, s := range c.Ops() {
		names = append(names, s.Name)
		if strings.HasPrefix(s.Name, "get_") && !slices.Equal(s.Phases, []string{PhaseFirstByte, PhaseLastByte}) {
			t.Errorf("%s phases = %v", s.Name, s.Phases)
		}
		if s.DefaultRate <= 0 || s.DefaultRate > 0.1 {
			t.Errorf("%s default rate %g: want a low positive rate", s.Name, s.DefaultRate)
		}
	}
	want := []string{
		"put_4KiB", "get_4KiB", "head_4KiB", "delete_4KiB",
		"put_128KiB", "get_128KiB", "head_128KiB", "delete_128KiB",
		"put_1MiB", "get_1MiB", "head_1MiB", "delete_1MiB",
		"put_8MiB", "get_8MiB", "head_8MiB", "delete_8MiB",
		"list", "ledger_write", "ledger_check",
	}
	if !slices.Equal(names, want) {
		t.Errorf("ops = %v\nwant %v", names, want)
	}
}

func TestDecodeAndValidate(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig
	src := `
endpoint: https://s3.example.com
bucket: canary-bucket
sizes: [1KiB, 64MiB]
multipart_threshold: 16MiB
abandoned_after: 48h
access_key_id_file: ` + keyFile + `
secret_access_key_env: HOME
`
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("valid config: %v", errs)
	}
	if !slices.Equal(c.Sizes, []Size{KiB, 64 * MiB}) || c.MultipartThreshold != 16*MiB || c.AbandonedAfter != 48*time.Hour {
		t.Errorf("decoded sizes %v threshold %v", c.Sizes, c.MultipartThreshold)
	}
	if _, err := yaml.Marshal(&c); err != nil {
		t.Errorf("marshal: %v", err)
	}
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"no endpoint", func(c *Config) { c.Endpoint = "" }, "endpoint: missing"},
		{"path in endpoint", func(c *Config) { c.Endpoint = "https://h/bucket" }, "endpoint: must be scheme://host[:port] without a path"},
		{"credentials in endpoint", func(c *Config) { c.Endpoint = "https://a:b@h" }, "endpoint: must not contain credentials"},
		{"scheme", func(c *Config) { c.Endpoint = "ftp://h" }, "endpoint: scheme must be http or https"},
		{"addressing", func(c *Config) { c.Addressing = "dns" }, `addressing: must be auto, path or virtual, got "dns"`},
		{"bucket", func(c *Config) { c.Bucket = "Bad_Bucket" }, "bucket: "},
		{"prefix", func(c *Config) { c.Prefix = "no-slash" }, "prefix: "},
		{"key without secret", func(c *Config) { c.AccessKeyIDEnv = "HOME" }, "secret_access_key_file: set both"},
		{"token alone", func(c *Config) { c.SessionTokenEnv = "HOME" }, "session_token_file: a session token needs"},
		{"missing env", func(c *Config) { c.AccessKeyIDEnv, c.SecretAccessKeyEnv = "DBCANARY_NOPE_1", "HOME" }, "access_key_id_env: environment variable DBCANARY_NOPE_1 is not set"},
		{"no sizes", func(c *Config) { c.Sizes = nil }, "sizes: list 1 to 8 object sizes"},
		{"dup size", func(c *Config) { c.Sizes = []Size{KiB, KiB} }, "sizes[1]: 1KiB is listed twice"},
		{"zero size", func(c *Config) { c.Sizes = []Size{0} }, "sizes[0]: must be between 1B and 1GiB"},
		{"threshold", func(c *Config) { c.MultipartThreshold = MiB }, "multipart_threshold: must be between 5MiB"},
		{"max objects", func(c *Config) { c.MaxObjectsPerSize = 0 }, "max_objects_per_size: must be between 1 and 100"},
		{"region", func(c *Config) { c.Region = "" }, "region: missing"},
		{"abandoned_after short", func(c *Config) { c.AbandonedAfter = time.Hour },
			"abandoned_after: must be between 13h (longer than the 12h a canary object may still be read by the process that wrote it, plus an hour for clock skew; the heartbeat is refreshed every 1m0s) and 720h, got 1h0m0s"},
		{"abandoned_after zero", func(c *Config) { c.AbandonedAfter = 0 }, "abandoned_after: must be between 13h"},
		{"abandoned_after long", func(c *Config) { c.AbandonedAfter = 1000 * time.Hour }, "abandoned_after: must be between 13h"},
		{"listing_grace negative", func(c *Config) { c.ListingGrace = -time.Second },
			"listing_grace: must be between 0 (a strongly consistent store: a key missing from a listing and from HEAD is not_found at once) and 12h, got -1s"},
		{"listing_grace long", func(c *Config) { c.ListingGrace = 13 * time.Hour }, "listing_grace: must be between 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig
			c.Endpoint = "http://127.0.0.1:9000"
			tc.edit(&c)
			var msgs []string
			for _, err := range c.Validate() {
				msgs = append(msgs, err.Error())
			}
			if !slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, tc.want) }) {
				t.Errorf("errors %q: want one starting with %q", msgs, tc.want)
			}
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in     string
		tls    bool
		host   string
		secure bool
	}{
		{"https://s3.example.com", false, "s3.example.com", true},
		{"http://127.0.0.1:9000/", false, "127.0.0.1:9000", false},
		{"127.0.0.1:9000", false, "127.0.0.1:9000", false},
		{"minio.local:9000", true, "minio.local:9000", true},
	} {
		host, secure, err := parseEndpoint(tc.in, tc.tls)
		if err != nil || host != tc.host || secure != tc.secure {
			t.Errorf("parseEndpoint(%q, %v) = %q, %v, %v", tc.in, tc.tls, host, secure, err)
		}
	}
}
