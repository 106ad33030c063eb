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
		{"queue prefix", func(c *Config) { c.QueuePrefix = strings.Repeat("q", 201) }, "queue_prefix: too long"},
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
