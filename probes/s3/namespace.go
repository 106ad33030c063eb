package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"

	"github.com/dbcanary/dbcanary/probes"
)

// errNoBucket is a listing's answer when the bucket does not exist.
var errNoBucket = errors.New("bucket does not exist")

// Prepare checks the bucket by listing this instance's prefix (the only
// bucket read the canary needs permission for), creates the bucket when it is
// missing and allowed, deletes objects an earlier run of this instance left
// behind, and sets the lifecycle rule where permitted.
func (p *Probe) Prepare(ctx context.Context) error {
	n, err := p.sweep(ctx, p.live.run)
	switch {
	case errors.Is(err, errNoBucket):
		if err := p.createBucket(ctx); err != nil {
			return err
		}
		p.live.reset()
	case err != nil:
		return err
	case n > 0:
		p.logger.Info("deleted canary objects left by an earlier run", "prefix", p.prefix, "objects", n)
	}
	p.ensureLifecycle(ctx)
	return nil
}

func (p *Probe) createBucket(ctx context.Context) error {
	if !p.cfg.CreateBucket {
		return probes.Fail(probes.CauseNotFound, fmt.Errorf("%s: the bucket does not exist and create_bucket is false: create it, or set create_bucket: true and grant s3:CreateBucket", p.where))
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
			return probes.Fail(probes.CauseAuth, fmt.Errorf("%s: the bucket does not exist and these credentials may not create it: missing permission s3:CreateBucket on arn:aws:s3:::%s (create the bucket, or grant that permission): %w",
				p.where, p.cfg.Bucket, err))
		case "BucketAlreadyExists":
			return probes.Fail(probes.CauseAuth, fmt.Errorf("%s: the bucket name is taken by another account: choose another bucket: %w", p.where, err))
		}
	}
	return p.classify("create bucket", p.cfg.Bucket, err)
}

// sweep deletes the objects under this instance's prefix whose key is not
// from run (all of them when run is empty) and returns how many it deleted.
func (p *Probe) sweep(ctx context.Context, run string) (int, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stale []string
	for info := range p.client.ListObjects(lctx, p.cfg.Bucket, minio.ListObjectsOptions{Prefix: p.prefix, Recursive: true}) {
		if info.Err != nil {
			var er minio.ErrorResponse
			if errors.As(info.Err, &er) {
				switch er.Code {
				case "NoSuchBucket":
					return 0, fmt.Errorf("%s: %w", p.where, errNoBucket)
				case "AccessDenied":
					return 0, probes.Fail(probes.CauseAuth, fmt.Errorf("%s: these credentials may not list the canary prefix: missing permission s3:ListBucket on arn:aws:s3:::%s for prefix %s: %w",
						p.where, p.cfg.Bucket, p.prefix, info.Err))
				}
			}
			return 0, p.classify("list", p.prefix, info.Err)
		}
		if !strings.HasPrefix(info.Key, p.prefix) {
			continue // never touch a key outside the prefix, whatever the server lists
		}
		if name := info.Key[strings.LastIndexByte(info.Key, '/')+1:]; run != "" && strings.HasPrefix(name, run+"-") {
			continue // this run's own object: the live set owns it
		}
		stale = append(stale, info.Key)
		if len(stale) >= maxListed {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, p.classify("list", p.prefix, err)
	}
	for i, key := range stale {
		if err := p.client.RemoveObject(ctx, p.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
			var er minio.ErrorResponse
			if errors.As(err, &er) && er.Code == "AccessDenied" {
				return i, probes.Fail(probes.CauseAuth, fmt.Errorf("%s: these credentials may not delete canary objects: missing permission s3:DeleteObject on arn:aws:s3:::%s/%s*: %w",
					p.where, p.cfg.Bucket, p.base, err))
			}
			return i, p.classify("delete", key, err)
		}
	}
	return len(stale), nil
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
