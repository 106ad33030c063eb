package rabbitmq

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dbcanary/dbcanary/probes"
)

// Config is the `rabbitmq:` section of a target.
type Config struct {
	// URL is amqp://host:port/vhost or amqps://host:port/vhost. It must not
	// carry a password: use password_file or password_env.
	URL string `yaml:"url"`
	// URLs are the nodes of one cluster, each as url: the probe connects to
	// one and moves to the next when a dial fails or its connection drops.
	// url is a list of one; set one of the two.
	URLs []string `yaml:"urls"`
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
	// NodeCheckInterval is how often, given urls, each node the probe is not
	// connected to is checked with an AMQP handshake (dbcanary_store_node_up);
	// 0 turns the checks off.
	NodeCheckInterval time.Duration `yaml:"node_check_interval"`
	// Ledger configures the durability ledger (ledger.go).
	Ledger LedgerConfig `yaml:"ledger"`
}

// DefaultConfig holds the defaults.
var DefaultConfig = Config{
	ClientAuth:        probes.ClientAuth{ConnectTimeout: 5 * time.Second},
	Heartbeat:         10 * time.Second,
	QueueType:         "classic",
	QueueExpires:      30 * time.Minute,
	MaxLength:         1000,
	MessageSize:       1024,
	LossTimeout:       30 * time.Second,
	NodeCheckInterval: 30 * time.Second,
}

// Minimum body: the header line must fit.
const minMessageSize = 128

// Validate implements probes.Config.
func (c *Config) Validate() []error {
	var errs []error
	switch {
	case c.URL != "" && len(c.URLs) > 0:
		errs = append(errs, probes.Invalid("urls", "set url (one node) or urls (the nodes of a cluster), not both"))
	case len(c.URLs) > 0:
		errs = append(errs, validateURLs(c.URLs)...)
	case c.URL == "":
		errs = append(errs, probes.Invalid("url", "missing: amqp://host:5672/vhost or amqps://host:5671/vhost"))
	default:
		errs = append(errs, validateURL("url", c.URL)...)
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
	if c.NodeCheckInterval != 0 && c.NodeCheckInterval < time.Second {
		errs = append(errs, probes.Invalid("node_check_interval", "must be 0 (no checks) or at least 1s, got %s", c.NodeCheckInterval))
	}
	errs = append(errs, c.validateLedger()...)
	if len(c.QueuePrefix) > 200 {
		errs = append(errs, probes.Invalid("queue_prefix", "too long (queue names are at most 255 bytes)"))
	}
	return errs
}

// validateURL checks one node's URL; field names it in the messages.
func validateURL(field, raw string) []error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return []error{probes.Invalid(field, "missing: amqp://host:5672/vhost or amqps://host:5671/vhost")}
	case err != nil:
		return []error{probes.Invalid(field, "not a valid URL: %v", redactURLError(err))}
	}
	if _, hasPass := u.User.Password(); hasPass {
		return []error{probes.Invalid(field, "must not contain a password: use password_file or password_env")}
	}
	if _, err := amqp.ParseURI(raw); err != nil {
		return []error{probes.Invalid(field, "%v", err)}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return []error{probes.Invalid(field, "port must be between 1 and 65535, got %s", p)}
		}
	}
	return nil
}

// validateURLs checks urls: each as url, and together as the nodes of one
// cluster: the same vhost and user (the canary's queues and credentials
// must be the same whichever node it is connected to), no node twice.
func validateURLs(urls []string) []error {
	var errs []error
	first := -1 // the first valid URL, the others are compared with
	var vhost, user string
	for i, raw := range urls {
		field := fmt.Sprintf("urls[%d]", i)
		if e := validateURL(field, raw); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		for j := range i {
			if urls[j] == raw {
				errs = append(errs, probes.Invalid(field, "the same node as urls[%d]", j))
			}
		}
		uri, _ := amqp.ParseURI(raw)
		u, _ := url.Parse(raw)
		if first < 0 {
			first, vhost, user = i, uri.Vhost, u.User.Username()
			continue
		}
		if uri.Vhost != vhost {
			errs = append(errs, probes.Invalid(field, "vhost %q differs from urls[%d]'s %q: the URLs are the nodes of one cluster, with one canary queue", uri.Vhost, first, vhost))
		}
		if u.User.Username() != user {
			errs = append(errs, probes.Invalid(field, "user %q differs from urls[%d]'s %q: one user for every node (or set username)", u.User.Username(), first, user))
		}
	}
	return errs
}

// Endpoints implements probes.Endpointer: every node URL.
func (c *Config) Endpoints() []string { return c.nodeURLs() }

// nodeURLs is the target's nodes: urls, or url as a list of one.
func (c *Config) nodeURLs() []string {
	if len(c.URLs) > 0 {
		return c.URLs
	}
	return []string{c.URL}
}

// Ops implements probes.Config.
func (c *Config) Ops() []probes.OpSpec {
	specs := []probes.OpSpec{
		{Name: OpPublish, DefaultRate: 1, Sent: float64(c.MessageSize), Received: float64(c.MessageSize), Help: "publish a persistent message with publisher confirms; latency ends at the broker's confirm"},
		{Name: OpConsume, Async: true, Phases: nil, Help: "one sample per canary message received: latency from the publish's intended start, service time from its send; body compared byte for byte"},
	}
	for _, s := range probes.LedgerSpecs() {
		if s.Name == probes.OpLedgerCheck {
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
