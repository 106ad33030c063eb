package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbcanary/dbcanary/internal/config"
	"github.com/dbcanary/dbcanary/internal/shard"
)

// EnvVantage is the default of --vantage, so a pod can take it from its zone.
const EnvVantage = "DBCANARY_VANTAGE"

var vantageRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// shardFlags select which targets this replica probes (--shard.*) and name the
// place it probes from (--vantage); addShardFlags in run.go defines them with run's other flags.
type shardFlags struct {
	index   int
	count   int
	vantage string
}

// resolve fills what the flags leave unset from the environment.
func (s *shardFlags) resolve() (index, count int, from string, err error) {
	env, err := shard.FromEnvironment()
	if err != nil {
		return 0, 0, "", err
	}
	index, count, from = s.index, s.count, "--shard.index"
	if count == 0 {
		count = env.Count
	}
	if index < 0 {
		index, from = env.Index, env.IndexFrom
	}
	switch {
	case count < 0:
		return 0, 0, "", fmt.Errorf("--shard.count: must be at least 1, got %d", count)
	case count == 0 && s.index >= 0:
		return 0, 0, "", errors.New("--shard.index needs --shard.count (or $" + shard.EnvCount + ")")
	case count <= 1:
		return 0, 1, "", nil
	case index < 0:
		return 0, 0, "", fmt.Errorf("--shard.count=%d needs --shard.index, $%s or a StatefulSet host name NAME-N", count, shard.EnvIndex)
	}
	if err := shard.Validate(index, count); err != nil {
		return 0, 0, "", fmt.Errorf("%w (index from %s)", err, from)
	}
	return index, count, from, nil
}

// apply returns cfg restricted to the targets this replica owns; cfg itself
// is not modified. Call it after every config load, reloads included.
func (s *shardFlags) apply(cfg *config.Config, logger *slog.Logger) (*config.Config, error) {
	index, count, from, err := s.resolve()
	if err != nil {
		return nil, err
	}
	if count == 1 {
		return cfg, nil
	}
	out := *cfg
	out.Targets = shard.Select(cfg.Targets, index, count)
	logger.Info("sharding targets", "shard_index", index, "shard_count", count, "index_from", from,
		"owned", len(out.Targets), "configured", len(cfg.Targets))
	if len(out.Targets) == 0 {
		logger.Warn("this shard owns no target: more replicas than targets", "shard_index", index, "shard_count", count)
	}
	return &out, nil
}

// registerer wraps reg so every series registered through it carries
// vantage="NAME" when a vantage is set; otherwise it returns reg.
func (s *shardFlags) registerer(reg prometheus.Registerer) (prometheus.Registerer, error) {
	v := s.vantage
	if v == "" {
		v = os.Getenv(EnvVantage)
	}
	if v == "" {
		return reg, nil
	}
	if !vantageRE.MatchString(v) {
		return nil, fmt.Errorf("--vantage: %q must be 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", v)
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"vantage": v}, reg), nil
}
