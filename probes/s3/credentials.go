package s3

import (
	"fmt"
	"sync"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/dbcanary/dbcanary/probes"
)

// refreshEvery is how often secret files are re-read, so a rotated
// Kubernetes Secret is picked up without a restart.
const refreshEvery = time.Minute

// secretProvider serves static credentials from files or environment
// variables. Errors name the file or variable, never the value.
type secretProvider struct {
	key, secret, token probes.SecretRef

	mu   sync.Mutex
	next time.Time
}

func (p *secretProvider) Retrieve() (credentials.Value, error) {
	return p.RetrieveWithCredContext(nil)
}

func (p *secretProvider) RetrieveWithCredContext(*credentials.CredContext) (credentials.Value, error) {
	id, err := p.key.Value()
	if err != nil {
		return credentials.Value{}, fmt.Errorf("access key id: %w", err)
	}
	secret, err := p.secret.Value()
	if err != nil {
		return credentials.Value{}, fmt.Errorf("secret access key: %w", err)
	}
	token, err := p.token.Value()
	if err != nil {
		return credentials.Value{}, fmt.Errorf("session token: %w", err)
	}
	if id == "" || secret == "" {
		return credentials.Value{}, fmt.Errorf("access key id or secret access key is empty")
	}
	p.mu.Lock()
	p.next = time.Now().Add(refreshEvery)
	p.mu.Unlock()
	return credentials.Value{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token, SignerType: credentials.SignatureV4}, nil
}

func (p *secretProvider) IsExpired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().After(p.next)
}

// newCredentials returns the configured static credentials, or the default
// chain: AWS_* environment, the shared credentials file, then IAM (EC2
// instance role, ECS task role, or EKS web identity via
// AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN).
func newCredentials(c *Config) *credentials.Credentials {
	key := probes.SecretRef{File: c.AccessKeyIDFile, Env: c.AccessKeyIDEnv}
	if key.IsSet() {
		return credentials.New(&secretProvider{
			key:    key,
			secret: probes.SecretRef{File: c.SecretAccessKeyFile, Env: c.SecretAccessKeyEnv},
			token:  probes.SecretRef{File: c.SessionTokenFile, Env: c.SessionTokenEnv},
		})
	}
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{},
	})
}
