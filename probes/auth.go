package probes

import "time"

// ClientAuth is how a client reaches and authenticates to a store: the
// username, where its password comes from, TLS and the connect timeout. The
// cassandra, opensearch and rabbitmq sections embed it with `yaml:",inline"`,
// so its keys sit directly in the section (username:, password_file:, tls:, ...).
type ClientAuth struct {
	// Username to authenticate as; empty means no authentication where the
	// backend allows it (AuthRules).
	Username string `yaml:"username"`
	// PasswordFile is re-read at every connect (or request), so a rotated
	// Kubernetes Secret is picked up; PasswordEnv names an environment
	// variable instead. At most one of them is set.
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`
	// TLS settings; a URL scheme (https://, amqps://) turns TLS on by itself.
	TLS TLSConfig `yaml:"tls"`
	// ConnectTimeout bounds dialling, the TLS handshake and, where the
	// protocol has one, its handshake and authentication.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
}

// Password is where the password comes from.
func (a *ClientAuth) Password() SecretRef {
	return SecretRef{File: a.PasswordFile, Env: a.PasswordEnv}
}

// AuthRules is what a backend requires of its ClientAuth. The two message
// fields keep the wording each backend has always reported.
type AuthRules struct {
	// PasswordRequired requires a password even without a username (RabbitMQ,
	// whose user may come from the URL). Otherwise a username needs a
	// password and a password needs a username.
	PasswordRequired bool
	// NoUsername is the message for a password set without a username
	// (when PasswordRequired is false).
	NoUsername string
	// ShowTimeout adds the value to a non-positive connect_timeout's message.
	ShowTimeout bool
}

// Validate checks the credentials, TLS files and connect timeout. Fields are
// named relative to the section (password_file, tls.ca_file), like every
// probes.Config error: the config loader prefixes the section's path.
func (a *ClientAuth) Validate(r AuthRules) []error {
	var errs []error
	secret := a.Password()
	switch {
	case r.PasswordRequired || a.Username != "":
		errs = append(errs, secret.Validate("password_file", "password_env", true)...)
	case secret.IsSet():
		errs = append(errs, Invalid("username", "%s", r.NoUsername))
	}
	errs = append(errs, a.TLS.Validate("tls.")...)
	if a.ConnectTimeout <= 0 {
		if r.ShowTimeout {
			errs = append(errs, Invalid("connect_timeout", "must be positive, got %s", a.ConnectTimeout))
		} else {
			errs = append(errs, Invalid("connect_timeout", "must be positive"))
		}
	}
	return errs
}
