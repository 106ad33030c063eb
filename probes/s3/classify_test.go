package s3

import (
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/probes"
)

// TestAuthErrorsNameTheField: a rejected credential is auth with the config
// field to check, never the secret itself.
func TestAuthErrorsNameTheField(t *testing.T) {
	p := testProbe(t)
	for code, want := range map[string]string{
		"SignatureDoesNotMatch":        "check secret_access_key_file / secret_access_key_env",
		"InvalidAccessKeyId":           "check access_key_id_file / access_key_id_env",
		"ExpiredToken":                 "check session_token_file / session_token_env",
		"AuthorizationHeaderMalformed": "check region",
		"InvalidSecurity":              "check access_key_id, secret_access_key and session_token",
	} {
		err := p.classify("put", "dbcanary/t/i-1/4KiB/x-1", minio.ErrorResponse{Code: code, StatusCode: 403, Message: "The request signature we calculated does not match"})
		if probes.CauseOf(err) != probes.CauseAuth || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "the credentials were rejected") {
			t.Errorf("%s: cause %s, %v; want auth saying %q", code, probes.CauseOf(err), err, want)
		}
	}
}
