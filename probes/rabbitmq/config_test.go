package rabbitmq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func validConfig(t *testing.T) Config {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig
	c.URL = "amqp://canary@127.0.0.1:5672/"
	c.PasswordFile = pw
	return c
}

func TestValidateDefaults(t *testing.T) {
	c := validConfig(t)
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("defaults with url and password: %v", errs)
	}
	if c.QueueType != "classic" || c.ConnectTimeout != 5*time.Second || c.LossTimeout != 30*time.Second {
		t.Errorf("defaults changed: %+v", c)
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"no url", func(c *Config) { c.URL = "" }, "url: missing: amqp://host:5672/vhost or amqps://host:5671/vhost"},
		{"password in url", func(c *Config) { c.URL = "amqp://u:hunter2@h/" }, "url: must not contain a password: use password_file or password_env"},
		{"bad scheme", func(c *Config) { c.URL = "http://h/" }, "url: AMQP scheme must be either 'amqp://' or 'amqps://'"},
		{"bad port", func(c *Config) { c.URL = "amqp://h:70000/" }, "url: port must be between 1 and 65535, got 70000"},
		{"no password", func(c *Config) { c.PasswordFile = "" }, "a secret is required"},
		{"queue type", func(c *Config) { c.QueueType = "stream" }, `queue_type: must be classic or quorum, got "stream"`},
		{"queue expires", func(c *Config) { c.QueueExpires = time.Millisecond }, "queue_expires: must be at least 1s"},
		{"max length", func(c *Config) { c.MaxLength = 0 }, "max_length: must be at least 1, got 0"},
		{"message size", func(c *Config) { c.MessageSize = 10 }, "message_size: must be between 128 and 134217728 bytes, got 10"},
		{"loss timeout", func(c *Config) { c.LossTimeout = 0 }, "loss_timeout: must be positive"},
		{"heartbeat", func(c *Config) { c.Heartbeat = -time.Second }, "heartbeat: must not be negative"},
		{"node check interval", func(c *Config) { c.NodeCheckInterval = 100 * time.Millisecond }, "node_check_interval: must be 0 (no checks) or at least 1s, got 100ms"},
		{"negative node check interval", func(c *Config) { c.NodeCheckInterval = -time.Second }, "node_check_interval: must be 0 (no checks) or at least 1s, got -1s"},
		{"queue prefix", func(c *Config) { c.QueuePrefix = strings.Repeat("q", 201) }, "queue_prefix: too long"},
		{"url and urls", func(c *Config) { c.URLs = []string{"amqp://h1/"} }, "urls: set url (one node) or urls (the nodes of a cluster), not both"},
		{"urls password", func(c *Config) { c.URL, c.URLs = "", []string{"amqp://h1/", "amqp://u:hunter2@h2/"} }, "urls[1]: must not contain a password: use password_file or password_env"},
		{"urls empty entry", func(c *Config) { c.URL, c.URLs = "", []string{"amqp://h1/", ""} }, "urls[1]: missing: amqp://host:5672/vhost or amqps://host:5671/vhost"},
		{"urls bad scheme", func(c *Config) { c.URL, c.URLs = "", []string{"http://h1/"} }, "urls[0]: AMQP scheme must be either 'amqp://' or 'amqps://'"},
		{"urls bad port", func(c *Config) { c.URL, c.URLs = "", []string{"amqp://h1/", "amqp://h2:70000/"} }, "urls[1]: port must be between 1 and 65535, got 70000"},
		{"urls unparsable", func(c *Config) { c.URL, c.URLs = "", []string{"amqp://u:hunter2@[::1"} }, "urls[0]: not a valid URL: parse: missing ']' in host"},
		{"urls twice", func(c *Config) { c.URL, c.URLs = "", []string{"amqp://h1/", "amqp://h2/", "amqp://h1/"} }, "urls[2]: the same node as urls[0]"},
		{"urls vhost", func(c *Config) { c.URL, c.URLs = "", []string{"amqp://h1/a", "amqp://h2/b"} }, `urls[1]: vhost "b" differs from urls[0]'s "a": the URLs are the nodes of one cluster, with one canary queue`},
		{"urls user", func(c *Config) { c.URL, c.URLs = "", []string{"amqp://x@h1/", "amqp://y@h2/"} }, `urls[1]: user "y" differs from urls[0]'s "x": one user for every node (or set username)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig(t)
			tc.modify(&c)
			errs := c.Validate()
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("errors %q lack %q", all, tc.want)
			}
			for _, e := range all {
				if strings.Contains(e, "hunter2") {
					t.Errorf("an error quotes the password: %s", e)
				}
			}
		})
	}
}

func TestValidateURLs(t *testing.T) {
	c := validConfig(t)
	c.URL, c.URLs = "", []string{"amqp://canary@127.0.0.1:15801/", "amqp://canary@127.0.0.1:15802/", "amqps://canary@127.0.0.1:15803/"}
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("three nodes: %v", errs)
	}
	if got := c.nodeURLs(); len(got) != 3 || got[2] != "amqps://canary@127.0.0.1:15803/" {
		t.Errorf("nodeURLs = %v", got)
	}
	one := validConfig(t)
	if got := one.nodeURLs(); len(got) != 1 || got[0] != one.URL {
		t.Errorf("url is a list of one: nodeURLs = %v", got)
	}
}
