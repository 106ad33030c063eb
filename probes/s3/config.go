package s3

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/dbcanary/dbcanary/probes"
)

// Config is the `s3:` section of a target.
type Config struct {
	// Endpoint is https://host[:port] or http://host[:port]; a bare host[:port]
	// uses TLS only when tls.enabled is set.
	Endpoint string `yaml:"endpoint"`
	// Region signs requests; set it so the client never asks the bucket's
	// location (a bucket-level call a least-privilege key may not make).
	Region string `yaml:"region"`
	// Addressing is auto, path (https://host/bucket/key) or virtual
	// (https://bucket.host/key). auto picks virtual for AWS, path elsewhere.
	Addressing string `yaml:"addressing"`
	// Bucket holds the canary objects.
	Bucket string `yaml:"bucket"`
	// CreateBucket creates the bucket when it is missing (needs s3:CreateBucket).
	CreateBucket bool `yaml:"create_bucket"`
	// Prefix is where this target's canaries write, default dbcanary/<target>/;
	// each process writes under <prefix><instance id>/<run>/ only (gc.go).
	Prefix string `yaml:"prefix"`
	// Static credentials (files are re-read every minute, so a rotated
	// Kubernetes Secret is picked up). Without them the default chain is used:
	// AWS_* environment, ~/.aws/credentials, then IAM (EC2 role, EKS web identity).
	AccessKeyIDFile     string           `yaml:"access_key_id_file"`
	AccessKeyIDEnv      string           `yaml:"access_key_id_env"`
	SecretAccessKeyFile string           `yaml:"secret_access_key_file"`
	SecretAccessKeyEnv  string           `yaml:"secret_access_key_env"`
	SessionTokenFile    string           `yaml:"session_token_file"`
	SessionTokenEnv     string           `yaml:"session_token_env"`
	TLS                 probes.TLSConfig `yaml:"tls"`
	ConnectTimeout      time.Duration    `yaml:"connect_timeout"`
	Sizes               []Size           `yaml:"sizes"`
	MultipartThreshold  Size             `yaml:"multipart_threshold"`
	MaxObjectsPerSize   int              `yaml:"max_objects_per_size"`
	LifecycleExpiry     bool             `yaml:"lifecycle_expiry"`
	ListConsistency     bool             `yaml:"list_consistency"`
	// ListingGrace is how long a listing may lag behind a write before a key
	// it does not show, and that HEAD does not find either, is not_found
	// (probe.go, listingLag); a key HEAD finds is never data loss.
	ListingGrace time.Duration `yaml:"listing_grace"`
	// AbandonedAfter is how long a run's heartbeat may go unrefreshed before
	// any live instance of the target deletes that run's objects (see gc.go).
	AbandonedAfter time.Duration `yaml:"abandoned_after"`
	// Ledger configures the durability ledger (ledger.go).
	Ledger probes.LedgerConfig `yaml:"ledger"`

	// recycle (bench profile s3-recycle only, never from YAML) makes get read
	// the objects in order, round the set, instead of at random.
	recycle bool
	// freshKeys (bench profile s3-sizes only, never from YAML) makes a put
	// past max_objects_per_size write a new key instead of overwriting
	// (objects.go, liveSet.fresh).
	freshKeys bool
}

// DefaultConfig holds the defaults.
var DefaultConfig = Config{
	Region:             "us-east-1",
	Addressing:         "auto",
	Bucket:             "dbcanary",
	CreateBucket:       true,
	ConnectTimeout:     5 * time.Second,
	Sizes:              []Size{4 * KiB, 128 * KiB, 1 * MiB, 8 * MiB},
	MultipartThreshold: 5 * MiB,
	MaxObjectsPerSize:  4,
	LifecycleExpiry:    true,
	ListConsistency:    true,
	ListingGrace:       5 * time.Minute,
	AbandonedAfter:     24 * time.Hour,
}

// Bounds of abandoned_after: above the life of any object a live process may
// still read (maxAge) with an hour for clock skew, and short enough that the
// objects of dead processes do not pile up.
const (
	minAbandonedAfter = maxAge + time.Hour
	maxAbandonedAfter = 30 * 24 * time.Hour
)

// fmtHours writes a whole number of hours as 13h rather than 13h0m0s.
func fmtHours(d time.Duration) string {
	if d%time.Hour == 0 {
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return d.String()
}

// Size is an object size (probes.Size: 4KiB, 1MiB, ...).
type Size = probes.Size

// Binary units.
const (
	KiB = probes.KiB
	MiB = probes.MiB
	GiB = probes.GiB
)

// Limits: the S3 minimum part size, and an object size a canary should not exceed.
const (
	minPartSize   = 5 * MiB
	maxObjectSize = 1 * GiB
	maxSizes      = 8 // each size is 5 op series: keep the label set small
)

// Validate implements probes.Config.
func (c *Config) Validate() []error {
	var errs []error
	if c.Endpoint == "" {
		errs = append(errs, probes.Invalid("endpoint", "missing: https://host[:port] of the S3 endpoint"))
	} else if _, _, err := parseEndpoint(c.Endpoint, false); err != nil {
		errs = append(errs, probes.Invalid("endpoint", "%v", err))
	}
	if c.Region == "" {
		errs = append(errs, probes.Invalid("region", "missing (us-east-1 for MinIO and most S3-compatible stores)"))
	}
	switch c.Addressing {
	case "auto", "path", "virtual":
	default:
		errs = append(errs, probes.Invalid("addressing", "must be auto, path or virtual, got %q", c.Addressing))
	}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		errs = append(errs, probes.Invalid("bucket", "%q: %v", c.Bucket, err))
	}
	if c.Prefix != "" && (strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") || len(c.Prefix) > 512) {
		errs = append(errs, probes.Invalid("prefix", "%q must end with '/', not start with '/', and be at most 512 bytes", c.Prefix))
	}
	key := probes.SecretRef{File: c.AccessKeyIDFile, Env: c.AccessKeyIDEnv}
	secret := probes.SecretRef{File: c.SecretAccessKeyFile, Env: c.SecretAccessKeyEnv}
	token := probes.SecretRef{File: c.SessionTokenFile, Env: c.SessionTokenEnv}
	switch {
	case key.IsSet() != secret.IsSet():
		errs = append(errs, probes.Invalid("secret_access_key_file", "set both an access key id (access_key_id_file or _env) and a secret key (secret_access_key_file or _env), or neither to use the default credential chain"))
	case !key.IsSet() && token.IsSet():
		errs = append(errs, probes.Invalid("session_token_file", "a session token needs access_key_id_* and secret_access_key_* too"))
	}
	errs = append(errs, key.Validate("access_key_id_file", "access_key_id_env", false)...)
	errs = append(errs, secret.Validate("secret_access_key_file", "secret_access_key_env", false)...)
	errs = append(errs, token.Validate("session_token_file", "session_token_env", false)...)
	errs = append(errs, c.TLS.Validate("tls.")...)
	if c.ConnectTimeout <= 0 {
		errs = append(errs, probes.Invalid("connect_timeout", "must be positive"))
	}
	if len(c.Sizes) == 0 || len(c.Sizes) > maxSizes {
		errs = append(errs, probes.Invalid("sizes", "list 1 to %d object sizes (each is its own set of op series), got %d", maxSizes, len(c.Sizes)))
	}
	seen := map[Size]bool{}
	for i, s := range c.Sizes {
		switch {
		case s < 1 || s > maxObjectSize:
			errs = append(errs, probes.Invalid(fmt.Sprintf("sizes[%d]", i), "must be between 1B and %s, got %s", maxObjectSize, s))
		case seen[s]:
			errs = append(errs, probes.Invalid(fmt.Sprintf("sizes[%d]", i), "%s is listed twice", s))
		}
		seen[s] = true
	}
	if c.MultipartThreshold < minPartSize || c.MultipartThreshold > maxObjectSize {
		errs = append(errs, probes.Invalid("multipart_threshold", "must be between %s (the S3 minimum part size) and %s, got %s", minPartSize, maxObjectSize, c.MultipartThreshold))
	}
	if c.MaxObjectsPerSize < 1 || c.MaxObjectsPerSize > 100 {
		errs = append(errs, probes.Invalid("max_objects_per_size", "must be between 1 and 100, got %d", c.MaxObjectsPerSize))
	}
	if c.ListingGrace < 0 || c.ListingGrace > maxAge {
		errs = append(errs, probes.Invalid("listing_grace", "must be between 0 (a strongly consistent store: a key missing from a listing and from HEAD is not_found at once) and %s, got %s", fmtHours(maxAge), c.ListingGrace))
	}
	if c.AbandonedAfter < minAbandonedAfter || c.AbandonedAfter > maxAbandonedAfter {
		errs = append(errs, probes.Invalid("abandoned_after", "must be between %s (longer than the %s a canary object may still be read by the process that wrote it, plus an hour for clock skew; the heartbeat is refreshed every %s) and %s, got %s",
			fmtHours(minAbandonedAfter), fmtHours(maxAge), heartbeatEvery, fmtHours(maxAbandonedAfter), c.AbandonedAfter))
	}
	errs = append(errs, c.Ledger.Validate(c.ledgerLimit())...)
	return errs
}

// parseEndpoint splits the endpoint into minio-go's host[:port] and whether
// TLS is on (from the scheme, or tlsEnabled for a bare host).
func parseEndpoint(endpoint string, tlsEnabled bool) (host string, secure bool, err error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
		if tlsEnabled {
			endpoint = "https://" + strings.TrimPrefix(endpoint, "http://")
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", false, fmt.Errorf("not a valid URL: %v", redactURLError(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	case u.User != nil:
		return "", false, fmt.Errorf("must not contain credentials: use access_key_id_file and secret_access_key_file")
	case u.Host == "":
		return "", false, fmt.Errorf("has no host")
	case u.Path != "" && u.Path != "/", u.RawQuery != "":
		return "", false, fmt.Errorf("must be scheme://host[:port] without a path or query (the bucket is set by bucket)")
	}
	return u.Host, u.Scheme == "https", nil
}

// redactURLError drops the URL (which may hold credentials) from a parse error.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %v", ue.Op, ue.Err)
	}
	return err
}

// Op kinds; each size gets <kind>_<size> (e.g. get_1MiB), plus one list op.
const (
	OpPut    = "put"
	OpGet    = "get"
	OpHead   = "head"
	OpDelete = "delete"
	OpList   = "list"
)

// Phases recorded by get.
const (
	PhaseFirstByte = "first_byte"
	PhaseLastByte  = "last_byte"
)

// Default rates in ops/s, per size for put/get/head/delete.
const (
	defaultObjectRate = 0.1
	defaultListRate   = 0.05
)

// OpName is the op name of a kind at a size: get_1MiB.
func OpName(kind string, s Size) string { return kind + "_" + s.String() }

// Ops implements probes.Config.
func (c *Config) Ops() []probes.OpSpec {
	specs := make([]probes.OpSpec, 0, 4*len(c.Sizes)+1)
	for _, s := range c.Sizes {
		specs = append(specs,
			probes.OpSpec{Name: OpName(OpPut, s), DefaultRate: defaultObjectRate, Sent: float64(s),
				Help: fmt.Sprintf("write a %s object with deterministic content (multipart above multipart_threshold); overwrites the oldest canary object of that size when max_objects_per_size is reached", s)},
			probes.OpSpec{Name: OpName(OpGet, s), DefaultRate: defaultObjectRate, Received: float64(s), Phases: []string{PhaseFirstByte, PhaseLastByte},
				Help: fmt.Sprintf("read a %s canary object back and compare every byte; phases first_byte and last_byte count from the op's intended start, like its latency (a setup write of a first object is left out)", s)},
			probes.OpSpec{Name: OpName(OpHead, s), DefaultRate: defaultObjectRate,
				Help: fmt.Sprintf("HEAD a %s canary object and check its size and ETag", s)},
			probes.OpSpec{Name: OpName(OpDelete, s), DefaultRate: defaultObjectRate,
				Help: fmt.Sprintf("delete the oldest %s canary object (one is always kept for get and head)", s)},
		)
	}
	specs = append(specs, probes.OpSpec{Name: OpList, DefaultRate: defaultListRate,
		Help: "list this process's prefix and check that every canary object written earlier is listed"})
	return append(specs, probes.LedgerSpecs()...)
}

// Endpoints implements probes.Endpointer.
func (c *Config) Endpoints() []string { return []string{c.Endpoint} }
