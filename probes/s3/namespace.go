package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"

	"github.com/dbcanary/dbcanary/probes"
)

// errNoBucket is a listing's answer when the bucket does not exist.
var errNoBucket = errors.New("bucket does not exist")

// Prepare checks the bucket by listing this run's prefix (the canary needs no
// bucket-level read), creates the bucket when it is missing and allowed,
// writes this run's heartbeat (which also proves the key may write under the
// prefix), starts refreshing it, and sets the lifecycle rule where permitted.
// It never deletes anything: objects of other processes, even with the same
// instance id, are theirs, and abandoned ones are the collector's (gc.go).
func (p *Probe) Prepare(ctx context.Context) error {
	err := p.checkBucket(ctx)
	switch {
	case errors.Is(err, errNoBucket):
		if err := p.createBucket(ctx); err != nil {
			return err
		}
		p.live.reset()
	case err != nil:
		return err
	}
	if err := p.beat(ctx); err != nil {
		return err
	}
	p.startBackground()
	p.ensureLifecycle(ctx)
	return nil
}

// checkBucket lists at most one key of this run's prefix.
func (p *Probe) checkBucket(ctx context.Context) error {
	_, err := p.firstKey(ctx, p.prefix)
	switch {
	case s3Code(err) == "NoSuchBucket":
		return fmt.Errorf("%s: %w", p.where, errNoBucket)
	case err != nil:
		return p.classify("list", p.prefix, err)
	}
	return nil
}

// firstKey returns the first key listed under prefix, "" when there is none.
func (p *Probe) firstKey(ctx context.Context, prefix string) (string, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine
	info, ok := <-p.client.ListObjects(lctx, p.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, MaxKeys: 1})
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case !ok:
		return "", nil
	}
	return info.Key, info.Err
}

func (p *Probe) createBucket(ctx context.Context) error {
	if !p.cfg.CreateBucket {
		return probes.Fail(probes.CauseSetup, fmt.Errorf("%s: bucket %q does not exist and create_bucket is false: create the bucket, or set create_bucket: true and grant s3:CreateBucket on arn:aws:s3:::%s",
			p.where, p.cfg.Bucket, p.cfg.Bucket))
	}
	err := p.client.MakeBucket(ctx, p.cfg.Bucket, minio.MakeBucketOptions{Region: p.cfg.Region})
	if err == nil {
		p.logger.Info("created the canary bucket", "bucket", p.cfg.Bucket)
		return nil
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch er.Code {
		case "BucketAlreadyOwnedByYou":
			return nil // created meanwhile by another instance
		case "AccessDenied":
			return probes.Fail(probes.CauseSetup, fmt.Errorf("%s: bucket %q does not exist and these credentials may not create it: missing permission s3:CreateBucket on arn:aws:s3:::%s (create the bucket, or grant that permission): %w",
				p.where, p.cfg.Bucket, p.cfg.Bucket, err))
		case "BucketAlreadyExists":
			return probes.Fail(probes.CauseSetup, fmt.Errorf("%s: bucket name %q is taken by another account: choose another bucket: %w", p.where, p.cfg.Bucket, err))
		}
	}
	return p.classify("create bucket", p.cfg.Bucket, err)
}

// lifecycleDays is how long a canary object may outlive a crashed dbcanary.
const lifecycleDays = 1

// ensureLifecycle adds (once) a rule expiring the canary prefix after a day
// (noncurrent versions too) and aborting its unfinished multipart uploads, so nothing is left behind if
// dbcanary dies. It merges with the bucket's other rules. Where the store or
// the key does not allow it, it logs a warning once and goes on: the canary
// still deletes what it writes.
func (p *Probe) ensureLifecycle(ctx context.Context) {
	if !p.cfg.LifecycleExpiry || p.lifeDone.Load() {
		return
	}
	id := "dbcanary " + strings.TrimSuffix(p.base, "/")
	if len(id) > 255 {
		id = id[:255]
	}
	cfg, err := p.client.GetBucketLifecycle(ctx, p.cfg.Bucket)
	if err != nil {
		var er minio.ErrorResponse
		var xe xml.UnmarshalError
		if errors.As(err, &xe) && strings.Contains(err.Error(), "ListBucketResult") {
			// OpenStack Swift's s3api has no lifecycle API: it ignores the
			// ?lifecycle query and answers GET with a bucket listing.
			p.noLifecycleAPI("GET ?lifecycle answered with a bucket listing")
			return
		}
		if !errors.As(err, &er) {
			p.logger.Debug("cannot read the bucket lifecycle; will retry", "err", err)
			return
		}
		switch er.Code {
		case "NoSuchLifecycleConfiguration":
			cfg = lifecycle.NewConfiguration()
		case "AccessDenied", "NotImplemented", "MethodNotAllowed":
			p.lifeDone.Store(true)
			p.logger.Warn("cannot read the bucket lifecycle configuration, so canary objects left by a crash will not expire by themselves (grant s3:GetLifecycleConfiguration and s3:PutLifecycleConfiguration, or set lifecycle_expiry: false)",
				"bucket", p.cfg.Bucket, "err", err)
			return
		default:
			p.logger.Debug("cannot read the bucket lifecycle; will retry", "err", err)
			return
		}
	}
	rule := lifecycle.Rule{
		ID:                             id,
		Status:                         "Enabled",
		RuleFilter:                     lifecycle.Filter{Prefix: p.base},
		Expiration:                     lifecycle.Expiration{Days: lifecycleDays},
		AbortIncompleteMultipartUpload: lifecycle.AbortIncompleteMultipartUpload{DaysAfterInitiation: lifecycleDays},
		// On a versioned bucket deletes keep the old versions: expire those too.
		NoncurrentVersionExpiration: lifecycle.NoncurrentVersionExpiration{NoncurrentDays: lifecycleDays},
	}
	found := false
	for i, r := range cfg.Rules {
		if r.ID != id {
			continue
		}
		// Only the essentials: some stores drop parts they do not support
		// (MinIO drops AbortIncompleteMultipartUpload), which must not cause a rewrite every start.
		if r.Status == rule.Status && r.RuleFilter.Prefix == p.base && r.Expiration.Days == rule.Expiration.Days {
			p.lifeDone.Store(true)
			return
		}
		cfg.Rules[i], found = rule, true
	}
	if !found {
		cfg.Rules = append(cfg.Rules, rule)
	}
	if err := p.client.SetBucketLifecycle(ctx, p.cfg.Bucket, cfg); err != nil {
		var er minio.ErrorResponse
		if errors.As(err, &er) && (er.Code == "MalformedXML" || er.Code == "NotImplemented") {
			p.noLifecycleAPI("PUT ?lifecycle answered " + er.Code)
			return
		}
		if errors.As(err, &er) && er.Code != "" && er.StatusCode != 503 && er.StatusCode != 500 {
			p.lifeDone.Store(true)
			p.logger.Warn("cannot set the lifecycle rule expiring the canary prefix, so canary objects left by a crash will not expire by themselves (grant s3:PutLifecycleConfiguration, or set lifecycle_expiry: false)",
				"bucket", p.cfg.Bucket, "prefix", p.base, "err", err)
			return
		}
		p.logger.Debug("cannot set the lifecycle rule; will retry", "err", err)
		return
	}
	p.lifeDone.Store(true)
	p.logger.Info("lifecycle rule set: canary objects expire after a day", "bucket", p.cfg.Bucket, "prefix", p.base, "rule", id)
}

// noLifecycleAPI records, once, that the store has no S3 lifecycle API, and
// says at warn level who cleans up instead.
func (p *Probe) noLifecycleAPI(evidence string) {
	if p.lifeDone.Swap(true) {
		return
	}
	p.logger.Warn("this S3 store has no bucket lifecycle API, so no lifecycle rule expires the canary prefix: dbcanary's own collector removes what crashed dbcanary processes leave (objects after abandoned_after, and their unfinished multipart uploads); set lifecycle_expiry: false to skip the attempt (see docs/s3.md)",
		"bucket", p.cfg.Bucket, "prefix", p.base, "evidence", evidence, "abandoned_after", p.abandonedAfter)
}

// Namespace names the canary's bucket and this process's key prefix for the status page.
func (p *Probe) Namespace() string { return "s3://" + p.cfg.Bucket + "/" + p.prefix }
