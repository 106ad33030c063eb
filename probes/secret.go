package probes

import (
	"fmt"
	"os"
	"strings"
)

// SecretRef names where a secret comes from: a file (re-read at every
// connect, so a rotated Kubernetes Secret is picked up) or an environment
// variable. The secret value itself never appears in config, logs, metrics or
// errors: only the file path or variable name does.
type SecretRef struct {
	File string
	Env  string
}

// IsSet reports whether a source is configured.
func (s SecretRef) IsSet() bool { return s.File != "" || s.Env != "" }

// Validate checks the reference. fileField and envField are the YAML names
// used in error messages (e.g. "password_file", "password_env").
func (s SecretRef) Validate(fileField, envField string, required bool) []error {
	var errs []error
	switch {
	case s.File != "" && s.Env != "":
		errs = append(errs, Invalid(fileField, "set only one of %s and %s", fileField, envField))
	case s.File != "":
		if _, err := s.readFile(); err != nil {
			errs = append(errs, Invalid(fileField, "%v", err))
		}
	case s.Env != "":
		if _, ok := os.LookupEnv(s.Env); !ok {
			errs = append(errs, Invalid(envField, "environment variable %s is not set", s.Env))
		}
	case required:
		errs = append(errs, Invalid(fileField, "a secret is required: set %s or %s", fileField, envField))
	}
	return errs
}

// Value reads the secret. Errors name the file or variable, never the value.
func (s SecretRef) Value() (string, error) {
	switch {
	case s.File != "":
		return s.readFile()
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", s.Env)
		}
		return v, nil
	}
	return "", nil
}

func (s SecretRef) readFile() (string, error) {
	b, err := readBounded(s.File, maxSecretBytes)
	if err != nil {
		// The *PathError names the path and the OS reason, not the content.
		return "", fmt.Errorf("cannot read secret file: %w", err)
	}
	// Files written by editors or `echo` end with a newline that is not part of the secret.
	return strings.TrimRight(string(b), "\r\n"), nil
}
