package config

import (
	"reflect"

	"go.yaml.in/yaml/v3"
)

func reflectType[T any]() reflect.Type { return reflect.TypeOf((*T)(nil)).Elem() }

// Dump renders the effective config: defaults filled in, every op with its
// resolved rate and timeout. It holds no secret values: configs only ever name
// secret files and environment variables, and URLs with passwords are rejected.
func Dump(cfg *Config) ([]byte, error) {
	type dumpOp struct {
		Rate    float64 `yaml:"rate,omitempty"` // absent for event-driven ops
		Timeout string  `yaml:"timeout"`
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	add := func(parent *yaml.Node, key string, v any) error {
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			return err
		}
		parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
		return nil
	}
	if err := add(root, "global", cfg.Global); err != nil {
		return nil, err
	}
	targets := &yaml.Node{Kind: yaml.SequenceNode}
	for _, t := range cfg.Targets {
		tn := &yaml.Node{Kind: yaml.MappingNode}
		ops := map[string]dumpOp{}
		for _, op := range t.Resolved {
			ops[op.Name] = dumpOp{Rate: op.Rate, Timeout: op.Timeout.String()}
		}
		for _, kv := range []struct {
			k string
			v any
		}{{"name", t.Name}, {"backend", t.Backend}, {"timeout", t.Timeout}, {"max_in_flight", t.MaxInFlight}, {"labels", t.Labels}, {"ops", ops}, {t.Backend, t.Probe}} {
			if kv.k == "labels" && len(t.Labels) == 0 {
				continue
			}
			if err := add(tn, kv.k, kv.v); err != nil {
				return nil, err
			}
		}
		targets.Content = append(targets.Content, tn)
	}
	root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "targets"}, targets)
	return yaml.Marshal(root)
}
