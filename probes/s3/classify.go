package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/probes"
)

// authCodes are S3 error codes saying the credentials themselves were
// rejected: unknown key, wrong secret, expired or invalid session token.
var authCodes = map[string]bool{
	"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "ExpiredToken": true, "InvalidToken": true,
	"TokenRefreshRequired": true, "AuthorizationHeaderMalformed": true, "InvalidSecurity": true,
	"AccountProblem": true, "InvalidClientTokenId": true, "RequestTimeTooSkewed": true,
}

// classify turns a minio-go error into a cause with a message naming the
// target, bucket and key (never credentials). Rejected credentials are auth;
// valid credentials that lack a permission (AccessDenied), or a missing
// bucket, are setup: both are configuration problems, never data loss.
func (p *Probe) classify(what, key string, err error) error {
	var pe *probes.Error
	if errors.As(err, &pe) {
		return err
	}
	wrapped := fmt.Errorf("%s: %s %s: %w", p.where, what, key, err)
	var er minio.ErrorResponse
	if errors.As(err, &er) && (er.Code != "" || er.StatusCode != 0) {
		switch {
		case authCodes[er.Code]:
			return probes.Fail(probes.CauseAuth, fmt.Errorf("%s: %s %s: the credentials were rejected (%s): %w", p.where, what, key, credentialHint(er.Code), err))
		case er.Code == "AccessDenied" || er.Code == "AllAccessDisabled":
			perm, arn := permissionFor(what), "arn:aws:s3:::"+p.cfg.Bucket
			if perm != "s3:ListBucket" {
				arn += "/" + key
			}
			return probes.Fail(probes.CauseSetup, fmt.Errorf("%s: %s %s: these credentials may not do this: missing permission %s on %s (see docs/s3.md for the policy): %w",
				p.where, what, key, perm, arn, err))
		case er.Code == "NoSuchKey":
			return probes.Fail(probes.CauseNotFound, wrapped)
		case er.Code == "NoSuchBucket":
			p.live.reset()
			return probes.Fail(probes.CauseSetup, fmt.Errorf("%s: %s %s: bucket %q does not exist (deleted behind dbcanary's back?); it is recreated if create_bucket is true: %w",
				p.where, what, key, p.cfg.Bucket, probes.ErrNamespaceGone))
		case er.StatusCode == http.StatusForbidden || er.StatusCode == http.StatusUnauthorized:
			return probes.Fail(probes.CauseAuth, wrapped)
		case er.Code == "NotImplemented" || er.StatusCode == http.StatusNotImplemented:
			return probes.Fail(probes.CauseSetup, fmt.Errorf("%s: %s %s: the store does not implement a feature this request uses (%s): a setup problem, not an outage: check that this S3 implementation supports what docs/s3.md lists for dbcanary: %w",
				p.where, what, key, unsupportedFeature(what, er), err))
		case slowDownCodes[er.Code]:
			return probes.Fail(probes.CauseServer, fmt.Errorf("%s: %s %s: %s: the store asks clients to reduce their request rate: %w", p.where, what, key, er.Code, err))
		case er.StatusCode == http.StatusServiceUnavailable:
			// Swift's s3api answers ServiceUnavailable ("Please reduce your
			// request rate.") when a storage server behind the proxy is down.
			return probes.Fail(probes.CauseServer, fmt.Errorf("%s: %s %s: the store is unavailable (HTTP 503 %s): a server behind the endpoint is down or overloaded: %w", p.where, what, key, er.Code, err))
		case storageFull(er):
			return probes.Fail(probes.CauseServer, fmt.Errorf("%s: %s %s: storage full (%s, HTTP %d): the store or a quota on the bucket or account refuses new data: %w",
				p.where, what, key, er.Code, er.StatusCode, err))
		}
		return probes.Fail(probes.CauseServer, wrapped)
	}
	if c := probes.Classify(err); c != probes.CauseOther {
		return probes.Fail(c, wrapped)
	}
	return probes.Fail(probes.CauseOther, wrapped)
}

// credentialHint names the config fields an auth error code points at.
func credentialHint(code string) string {
	switch code {
	case "SignatureDoesNotMatch":
		return "the secret key does not match the access key: check secret_access_key_file / secret_access_key_env"
	case "InvalidAccessKeyId":
		return "the store does not know the access key: check access_key_id_file / access_key_id_env"
	case "ExpiredToken", "InvalidToken", "TokenRefreshRequired":
		return "the session token is expired or invalid: check session_token_file / session_token_env"
	case "AuthorizationHeaderMalformed":
		return "the request was signed for another region than the store's: check region"
	case "RequestTimeTooSkewed":
		return "this host's clock is too far from the store's"
	}
	return "check access_key_id, secret_access_key and session_token"
}

// slowDownCodes are the throttling answers (503): AWS's SlowDown, MinIO's
// SlowDownRead and SlowDownWrite.
var slowDownCodes = map[string]bool{"SlowDown": true, "SlowDownRead": true, "SlowDownWrite": true}

// storageFull reports whether the store refused data for lack of space: 507
// Insufficient Storage (MinIO's XMinioStorageFull), a MinIO bucket quota, or
// EntityTooLarge, which is how s3api answers a Swift container or account
// quota (413): the canary's objects (at most 1 GiB) are far below any S3 size limit.
func storageFull(er minio.ErrorResponse) bool {
	switch er.Code {
	case "XMinioStorageFull", "XMinioAdminBucketQuotaExceeded", "EntityTooLarge", "QuotaExceeded":
		return true
	}
	return er.StatusCode == http.StatusInsufficientStorage
}

// unsupportedFeature names what a request that drew NotImplemented needed.
func unsupportedFeature(what string, er minio.ErrorResponse) string {
	msg := strings.ToLower(er.Message)
	switch {
	case strings.Contains(msg, "aws-chunked") || strings.Contains(msg, "chunk"):
		return "streaming (aws-chunked) uploads, which dbcanary itself never sends (its PUTs are UNSIGNED-PAYLOAD): a proxy in between may re-sign them"
	case strings.Contains(msg, "checksum") || strings.Contains(msg, "trailer"):
		return "additional checksums (x-amz-checksum-*, trailers)"
	case strings.Contains(msg, "multipart") || strings.Contains(msg, "part"):
		return "multipart uploads (objects above multipart_threshold)"
	case strings.HasPrefix(what, "list"):
		return "ListObjectsV2 with a prefix"
	}
	if er.Message != "" {
		return fmt.Sprintf("%s: %q", what, er.Message)
	}
	return what
}

// s3Code is the S3 error code inside err, or "".
func s3Code(err error) string {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code
	}
	return ""
}

// permissionFor names the IAM action an operation needs.
func permissionFor(what string) string {
	switch {
	case strings.HasPrefix(what, "put"):
		return "s3:PutObject"
	case strings.HasPrefix(what, "get"), strings.HasPrefix(what, "head"):
		return "s3:GetObject"
	case strings.HasPrefix(what, "delete"):
		return "s3:DeleteObject"
	case strings.HasPrefix(what, "list"):
		return "s3:ListBucket"
	case strings.HasPrefix(what, "create bucket"):
		return "s3:CreateBucket"
	}
	return "for " + what
}

// classifyRead classifies a failed get or head of an object this run wrote.
// An AccessDenied there is ambiguous: AWS answers it for a missing key when
// s3:ListBucket does not cover the key, and a HEAD's 403 carries no code at
// all, even for rejected credentials. Listing the key tells them apart: still
// listed means a missing permission (setup), gone means the object is gone
// (not_found), and a listing refused tells the credentials' state.
func (p *Probe) classifyRead(ctx context.Context, what string, o *object, err error) error {
	err = p.classify(what, o.key, err)
	if s3Code(err) != "AccessDenied" {
		return err
	}
	listed, lerr := p.firstKey(ctx, o.key)
	switch {
	case ctx.Err() != nil:
		return err
	case lerr != nil:
		lerr = p.classify("list", o.key, lerr)
		if c := probes.CauseOf(lerr); c == probes.CauseAuth || c == probes.CauseSetup {
			return probes.Fail(c, fmt.Errorf("%w (and listing it: %w)", err, lerr))
		}
		return err
	case listed == o.key:
		return err // listed: the object is there, reading it is not allowed
	}
	return probes.Fail(probes.CauseNotFound, fmt.Errorf("%s: %s %s: denied, and the key is no longer listed: the object is gone: %w", p.where, what, o.key, err))
}
