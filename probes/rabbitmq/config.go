package rabbitmq

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/internal/ledger"
	"github.com/dbcanary/dbcanary/probes"
)

// Config is the `rabbitmq:` section of a target.
type Config struct {
	// URL is amqp://host:port/vhost or amqps://host:port/vhost. It must not
	// carry a password: use password_file or password_env.
	URL string `yaml:"url"`
	// ClientAuth: username to authenticate as (SASL PLAIN; default: the
	// URL's user), password_file or password_env (required), tls (amqps://
	// turns TLS on by itself), and connect_timeout, which bounds the TCP, TLS
	// and AMQP handshakes.
	probes.ClientAuth `yaml:",inline"`
	// Heartbeat is the AMQP heartbeat interval (detects dead connections).
	Heartbeat time.Duration `yaml:"heartbeat"`
	// QueuePrefix names the canary queue: <queue_prefix>.<instance id>.
	// Default: dbcanary.<target name>.
	QueuePrefix string `yaml:"queue_prefix"`
	// QueueType is classic or quorum.
	QueueType string `yaml:"queue_type"`
	// QueueExpires deletes the canary queue after this long unused (x-expires),
	// so queues of instances that went away do not linger.
	QueueExpires time.Duration `yaml:"queue_expires"`
	// MaxLength bounds the queue depth (x-max-length; oldest dropped first).
	MaxLength int `yaml:"max_length"`
	// MessageSize is the body size in bytes, header included.
	MessageSize int `yaml:"message_size"`
	// LossTimeout is how long a confirmed message may take to come back
	// before it is counted as lost (only while connected).
	LossTimeout time.Duration `yaml:"loss_timeout"`
	// Ledger configures the durability ledger (ledger.go).
	Ledger LedgerConfig `yaml:"ledger"`
}

// DefaultConfig holds the defaults.
var DefaultConfig = Config{
	ClientAuth:   probes.ClientAuth{ConnectTimeout: 5 * time.Second},
	Heartbeat:    10 * time.Second,
	QueueType:    "classic",
	QueueExpires: 30 * time.Minute,
	MaxLength:    1000,
	MessageSize:  1024,
	LossTimeout:  30 * time.Second,
}

// Minimum body: the header line must fit.
const minMessageSize = 128

// Validate implements probes.Config.
func (c *Config) Validate() []error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, probes.Invalid("url", "missing: amqp://host:5672/vhost or amqps://host:5671/vhost"))
	} else if u, err := url.Parse(c.URL); err != nil {
		errs = append(errs, probes.Invalid("url", "not a valid URL: %v", redactURLError(err)))
	} else {
		if _, hasPass := u.User.Password(); hasPass {
			errs = append(errs, probes.Invalid("url", "must not contain a password: use password_file or password_env"))
		} else if _, err := amqp.ParseURI(c.URL); err != nil {
			errs = append(errs, probes.Invalid("url", "%v", err))
		} else if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				errs = append(errs, probes.Invalid("url", "port must be between 1 and 65535, got %s", p))
			}
		}
	}
	errs = append(errs, c.ClientAuth.Validate(probes.AuthRules{PasswordRequired: true})...)
	if c.Heartbeat < 0 {
		errs = append(errs, probes.Invalid("heartbeat", "must not be negative"))
	}
	if c.QueueType != "classic" && c.QueueType != "quorum" {
		errs = append(errs, probes.Invalid("queue_type", "must be classic or quorum, got %q", c.QueueType))
	}
	if c.QueueExpires < time.Second {
		errs = append(errs, probes.Invalid("queue_expires", "must be at least 1s, got %s (it bounds how long an abandoned canary queue lingers)", c.QueueExpires))
	}
	if c.MaxLength < 1 {
		errs = append(errs, probes.Invalid("max_length", "must be at least 1, got %d", c.MaxLength))
	}
	if c.MessageSize < minMessageSize || c.MessageSize > 128<<20 {
		errs = append(errs, probes.Invalid("message_size", "must be between %d and %d bytes, got %d", minMessageSize, 128<<20, c.MessageSize))
	}
	if c.LossTimeout <= 0 {
		errs = append(errs, probes.Invalid("loss_timeout", "must be positive"))
	}
	errs = append(errs, c.validateLedger()...)
	if len(c.QueuePrefix) > 200 {
		errs = append(errs, probes.Invalid("queue_prefix", "too long (queue names are at most 255 bytes)"))
	}
	return errs
}

// Ops implements probes.Config.
func (c *Config) Ops() []probes.OpSpec {
	specs := []probes.OpSpec{
		{Name: OpPublish, DefaultRate: 1, Sent: float64(c.MessageSize), Received: float64(c.MessageSize), Help: "publish a persistent message with publisher confirms; latency ends at the broker's confirm"},
		{Name: OpConsume, Async: true, Phases: nil, Help: "one sample per canary message received: latency from the publish's intended start, service time from its send; body compared byte for byte"},
	}
	for _, s := range ledger.Specs() {
		if s.Name == ledger.OpCheck {
			s.Help = "durability ledger: drain the ledger queue in order against the messages confirmed at least ledger.ages ago (10m): intact, missing (confirmed, never delivered) or corrupted"
		}
		specs = append(specs, s)
	}
	return specs
}

// Op names.
const (
	OpPublish = "publish"
	OpConsume = "consume"
)

// redactURLError drops the URL (which may hold credentials) from a parse error.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %v", ue.Op, ue.Err)
	}
	return err
}
