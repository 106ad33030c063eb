package opensearch

import (
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/dbcanary/dbcanary/probes"
)

// Config is the `opensearch:` section of a target.
type Config struct {
	// Addresses are the nodes' base URLs (http://host:9200 or https://...).
	// A request that fails on one node is retried on another (max_retries).
	Addresses []string `yaml:"addresses"`
	// ClientAuth: username for HTTP basic auth, with the password from
	// password_file (re-read for every request, so a rotated secret is picked
	// up) or password_env; tls (https:// addresses turn TLS on by
	// themselves); connect_timeout, which bounds the TCP and TLS handshakes.
	probes.ClientAuth `yaml:",inline"`
	// RequestTimeout bounds one HTTP attempt (the op timeout bounds the whole op).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// MaxRetries is how many times a request that failed on the network or
	// with 502/503/504 is retried, on the next node when several are given.
	MaxRetries int `yaml:"max_retries"`
	// IndexPrefix names the canary indices: <index_prefix><yyyy.mm.dd>.
	// Default: dbcanary-<target name>-.
	IndexPrefix string `yaml:"index_prefix"`
	// Replicas is number_of_replicas for the indices dbcanary creates.
	Replicas int `yaml:"replicas"`
	// RefreshInterval is the indices' refresh_interval: the expected
	// index-to-searchable lag the visibility op measures.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// Retention is how long a daily index is kept after its day ended.
	Retention time.Duration `yaml:"retention"`
	// BulkSize is the number of documents per bulk op.
	BulkSize int `yaml:"bulk_size"`
	// BodyWords is the length of a document's body, in words (~7 bytes each).
	BodyWords int `yaml:"body_words"`
	// VisibilityTimeout bounds the visibility op: a document not searchable
	// within it counts as a failure.
	VisibilityTimeout time.Duration `yaml:"visibility_timeout"`
	// PollInterval is how often the visibility op searches for its document
	// (the resolution of the measured lag).
	PollInterval time.Duration `yaml:"poll_interval"`
	// Ledger configures the durability ledger (ledger.go); its ages are
	// bounded by retention.
	Ledger probes.LedgerConfig `yaml:"ledger"`

	// benchIndex (bench profile opensearch-pmc only, never from YAML) makes
	// the run write into indices of its own, <prefix>bench-<run>-<day>,
	// created empty and deleted whole at Close, as opensearch-benchmark
	// creates and deletes its index: a bench run indexes hundreds of
	// thousands of documents, which must neither stay in the canary's daily
	// index nor make the next run index into a larger one. Retention sweeps
	// the ones a crashed run left.
	benchIndex bool
}

// DefaultConfig holds the defaults.
var DefaultConfig = Config{
	ClientAuth:        probes.ClientAuth{ConnectTimeout: 5 * time.Second},
	RequestTimeout:    10 * time.Second,
	MaxRetries:        2,
	Replicas:          1,
	RefreshInterval:   time.Second,
	Retention:         48 * time.Hour,
	BulkSize:          10,
	BodyWords:         200,
	VisibilityTimeout: 30 * time.Second,
	PollInterval:      50 * time.Millisecond,
}

// Op names.
const (
	OpIndex        = "index"
	OpBulk         = "bulk"
	OpSearchAll    = "search_default"
	OpSearchTerm   = "search_term"
	OpSearchPhrase = "search_phrase"
	OpGet          = "get"
	OpVisibility   = "visibility"
)

// Phase names.
const (
	PhaseIndexed = "indexed" // visibility: the index request alone
	PhaseVisible = "visible" // visibility: from the index ack to the first search hit
)

// authRules: a username needs a password and a password a username.
var authRules = probes.AuthRules{NoUsername: "missing: password_file/password_env is set but username is not"}

// Index names: lowercase, no \/*?"<>| space , # :, not starting with - _ +.
var prefixRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,200}$`)

// Validate implements probes.Config.
func (c *Config) Validate() []error {
	var errs []error
	if len(c.Addresses) == 0 {
		errs = append(errs, probes.Invalid("addresses", "missing: at least one node URL such as https://opensearch:9200"))
	}
	anyHTTP := false
	for i, a := range c.Addresses {
		field := "addresses[" + strconv.Itoa(i) + "]"
		u, err := url.Parse(a)
		switch {
		case err != nil:
			errs = append(errs, probes.Invalid(field, "not a valid URL: %v", redactURLError(err)))
			continue
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, probes.Invalid(field, "scheme must be http or https, got %q", u.Scheme))
		case u.Host == "":
			errs = append(errs, probes.Invalid(field, "no host: want http(s)://host:port"))
		}
		if u.User != nil {
			errs = append(errs, probes.Invalid(field, "must not contain credentials: use username and password_file or password_env"))
		}
		if u.Scheme == "http" {
			anyHTTP = true
		}
	}
	if anyHTTP && (c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.Enabled) {
		errs = append(errs, probes.Invalid("tls", "TLS settings need https:// addresses"))
	}
	errs = append(errs, c.ClientAuth.Validate(authRules)...)
	if c.RequestTimeout <= 0 {
		errs = append(errs, probes.Invalid("request_timeout", "must be positive"))
	}
	if c.MaxRetries < 0 || c.MaxRetries > 10 {
		errs = append(errs, probes.Invalid("max_retries", "must be between 0 and 10, got %d", c.MaxRetries))
	}
	if c.IndexPrefix != "" && !prefixRE.MatchString(c.IndexPrefix) {
		errs = append(errs, probes.Invalid("index_prefix", "%q is not a valid index name prefix: lowercase letters, digits, '.', '_', '-', not starting with '-', '_' or '.'", c.IndexPrefix))
	}
	if c.Replicas < 0 || c.Replicas > 10 {
		errs = append(errs, probes.Invalid("replicas", "must be between 0 and 10, got %d", c.Replicas))
	}
	if c.RefreshInterval < 10*time.Millisecond || c.RefreshInterval > 5*time.Minute {
		errs = append(errs, probes.Invalid("refresh_interval", "must be between 10ms and 5m, got %s (the visibility op needs periodic refreshes)", c.RefreshInterval))
	}
	if c.Retention < 24*time.Hour {
		errs = append(errs, probes.Invalid("retention", "must be at least 24h (indices are daily), got %s", c.Retention))
	}
	if c.Retention >= 24*time.Hour { // an invalid retention is reported once, above
		errs = append(errs, c.Ledger.Validate(c.ledgerLimit())...)
	}
	if c.BulkSize < 1 || c.BulkSize > 1000 {
		errs = append(errs, probes.Invalid("bulk_size", "must be between 1 and 1000, got %d", c.BulkSize))
	}
	if c.BodyWords < minBodyWords || c.BodyWords > maxBodyWords {
		errs = append(errs, probes.Invalid("body_words", "must be between %d and %d, got %d", minBodyWords, maxBodyWords, c.BodyWords))
	}
	if c.PollInterval < time.Millisecond {
		errs = append(errs, probes.Invalid("poll_interval", "must be at least 1ms, got %s", c.PollInterval))
	}
	if c.VisibilityTimeout <= c.PollInterval {
		errs = append(errs, probes.Invalid("visibility_timeout", "must be longer than poll_interval (%s), got %s", c.PollInterval, c.VisibilityTimeout))
	}
	return errs
}

// The range of body_words.
const (
	minBodyWords = 10
	maxBodyWords = 100000
)

// Ops implements probes.Config.
func (c *Config) Ops() []probes.OpSpec {
	doc, ref := payloadSizes(c.BodyWords)
	return append([]probes.OpSpec{
		{Name: OpIndex, DefaultRate: 1, Sent: doc, Help: "index one generated document into today's canary index"},
		{Name: OpBulk, DefaultRate: 0.2, Sent: doc * float64(c.BulkSize), Help: "bulk-index bulk_size documents (index-append); any item error fails the op"},
		{Name: OpSearchAll, DefaultRate: 0.5, Received: ref * refCount, Help: "match_all filtered to this instance's reference set; hits must be exactly the reference documents"},
		{Name: OpSearchTerm, DefaultRate: 0.5, Received: ref * refCount / float64(len(topics)), Help: "term query on the keyword field topic; hits must be exactly the expected reference documents"},
		{Name: OpSearchPhrase, DefaultRate: 0.5, Received: ref * refCount / float64(len(phrases)), Help: "match_phrase on the body; hits must be exactly the expected reference documents"},
		{Name: OpGet, DefaultRate: 1, Received: doc, Help: "get a document this instance indexed by id and compare every field"},
		{Name: OpVisibility, DefaultRate: 0.2, Sent: doc, Received: doc, Phases: []string{PhaseIndexed, PhaseVisible},
			Help: "index a document, then search until it is found: the index-to-searchable (refresh) lag, bounded by visibility_timeout"},
	}, probes.LedgerSpecs()...)
}

// redactURLError drops the URL (which may hold credentials) from a parse error.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// Endpoints implements probes.Endpointer.
func (c *Config) Endpoints() []string { return c.Addresses }
