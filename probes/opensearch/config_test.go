package opensearch

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsValidate(t *testing.T) {
	c := DefaultConfig
	c.Addresses = []string{"http://127.0.0.1:9200"}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("defaults with an address: %v", errs)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no address", func(c *Config) { c.Addresses = nil }, "addresses: missing"},
		{"bad scheme", func(c *Config) { c.Addresses = []string{"ftp://h:1"} }, `addresses[0]: scheme must be http or https, got "ftp"`},
		{"credentials in URL", func(c *Config) { c.Addresses = []string{"https://u:hunter2@h:9200"} }, "addresses[0]: must not contain credentials"},
		{"tls on http", func(c *Config) { c.TLS.Enabled = true }, "tls: TLS settings need https:// addresses"},
		{"user without password", func(c *Config) { c.Username = "canary" }, "password_file: a secret is required"},
		{"password without user", func(c *Config) { c.PasswordFile = "testdata/password" }, "username: missing"},
		{"unset env", func(c *Config) { c.Username = "u"; c.PasswordEnv = "DBCANARY_TEST_UNSET_VARIABLE" }, "password_env: environment variable DBCANARY_TEST_UNSET_VARIABLE is not set"},
		{"uppercase prefix", func(c *Config) { c.IndexPrefix = "Canary-" }, `index_prefix: "Canary-" is not a valid index name prefix`},
		{"short retention", func(c *Config) { c.Retention = time.Hour }, "retention: must be at least 24h"},
		{"refresh off", func(c *Config) { c.RefreshInterval = 0 }, "refresh_interval: must be between 10ms and 5m"},
		{"bulk size", func(c *Config) { c.BulkSize = 0 }, "bulk_size: must be between 1 and 1000, got 0"},
		{"visibility bound", func(c *Config) { c.VisibilityTimeout = c.PollInterval }, "visibility_timeout: must be longer than poll_interval"},
		{"replicas", func(c *Config) { c.Replicas = -1 }, "replicas: must be between 0 and 10, got -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig
			c.Addresses = []string{"http://127.0.0.1:9200"}
			tc.edit(&c)
			errs := c.Validate()
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			joined := strings.Join(all, "\n")
			if !strings.Contains(joined, tc.want) {
				t.Fatalf("errors %q do not contain %q", joined, tc.want)
			}
			if strings.Contains(joined, "hunter2") {
				t.Fatalf("an error shows the password: %q", joined)
			}
		})
	}
}

func TestConfigValidWithAuth(t *testing.T) {
	c := DefaultConfig
	c.Addresses = []string{"https://a:9200", "https://b:9200"}
	c.Username, c.PasswordFile = "canary", "testdata/password"
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("valid config: %v", errs)
	}
}
