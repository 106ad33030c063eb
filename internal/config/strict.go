package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// checkNode walks a YAML node against the Go type it will be decoded into and
// reports, with their path and line, unknown or duplicate keys and values of
// the wrong type, with the exact messages test/hostile pins (a "did you mean"
// for a near miss, the section path of a nested key). yaml.v3's KnownFields
// reports unknown keys with their line but not the section path, nor a hint.
func checkNode(n *yaml.Node, t reflect.Type, path string, errs *[]error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if isLeaf(t) {
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: line %d: %s", path, n.Line, cleanYAMLError(err)))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, fmt.Errorf("%s: line %d: expected a mapping, got %s", path, n.Line, kindName(n)))
			return
		}
		fields := yamlFields(t)
		seen := keyLines{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if err := seen.add(p, k); err != nil {
				*errs = append(*errs, err)
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, unknownField(p, k, fields))
				continue
			}
			checkNode(v, ft, p, errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			*errs = append(*errs, fmt.Errorf("%s: line %d: expected a list, got %s", path, n.Line, kindName(n)))
			return
		}
		for i, c := range n.Content {
			checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, fmt.Errorf("%s: line %d: expected a mapping, got %s", path, n.Line, kindName(n)))
			return
		}
		seen := keyLines{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if err := seen.add(p, k); err != nil {
				*errs = append(*errs, err)
				continue
			}
			checkNode(k, t.Key(), p, errs)
			checkNode(v, t.Elem(), p, errs)
		}
	}
}

// keyLines is the line each key of one mapping was first set on: the one
// check for a key set twice, wherever the loader walks a mapping.
type keyLines map[string]int

// add records key k, reported as path, and returns the duplicate-key error
// if k was already set.
func (s keyLines) add(path string, k *yaml.Node) error {
	if line, dup := s[k.Value]; dup {
		return fmt.Errorf("%s: line %d: duplicate key (first set on line %d)", path, k.Line, line)
	}
	s[k.Value] = k.Line
	return nil
}

var durationType = reflect.TypeOf(time.Duration(0))

func isLeaf(t reflect.Type) bool {
	if t == durationType {
		return true
	}
	if reflect.PointerTo(t).Implements(reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Map:
		return false
	}
	return true
}

// yamlFields maps YAML keys to field types, following `,inline` structs.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func unknownField(path string, k *yaml.Node, fields map[string]reflect.Type) error {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	if s := closest(k.Value, names); s != "" {
		return fmt.Errorf("%s: line %d: unknown field %q (did you mean %q?)", path, k.Line, k.Value, s)
	}
	return fmt.Errorf("%s: line %d: unknown field %q (known: %s)", path, k.Line, k.Value, strings.Join(names, ", "))
}

// closest returns the candidate within edit distance 2 of s, if any.
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}

// cleanYAMLError turns "yaml: unmarshal errors:\n  line 3: cannot unmarshal !!str `x` into int"
// into "cannot unmarshal !!str `x` into int".
func cleanYAMLError(err error) string {
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			if _, rest, ok := strings.Cut(m, ": "); ok && strings.HasPrefix(m, "line ") {
				m = rest
			}
			msgs[i] = m
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
