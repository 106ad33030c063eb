package config

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/probes"
)

// problem is one unknown key, key set twice or value of the wrong type that
// yaml.v3 found, with the path of the node it is about.
type problem struct {
	path string
	line int
	msg  string
	// unknownKey marks an unknown key, the one problem after which a
	// target's other checks still run.
	unknownKey bool
}

func (p problem) err() error {
	if p.path == "" {
		return fmt.Errorf("line %d: %s", p.line, p.msg)
	}
	return fmt.Errorf("%s: line %d: %s", p.path, p.line, p.msg)
}

// strictProblems decodes the whole file with yaml.v3's KnownFields(true)
// into documentType, only to collect every problem the library reports (it
// goes on after each one), and gives each the path of its node in doc (the
// same file, already parsed) with the messages test/hostile pins: a "did you
// mean" for a near miss, "expected a list/mapping" for a value of the wrong
// shape. yaml.v3 gives a line but no path; the path comes from the node at
// that line that the message is about.
func strictProblems(data []byte, doc *yaml.Node) []problem {
	t := documentType()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	idx := indexNodes(doc)
	types := structTypes(t)
	te, ok := err.(*yaml.TypeError)
	if !ok {
		// Only an Unmarshaler returning a plain error gets here: it has no position.
		return []problem{{msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	out := make([]problem, 0, len(te.Errors))
	for _, m := range te.Errors {
		out = append(out, idx.locate(m, types))
	}
	return out
}

// documentType is the file's shape as one Go type: global, and targets whose
// elements hold a Target's own keys and one optional section per backend.
func documentType() reflect.Type {
	fields := []reflect.StructField{{Name: "Target", Type: reflectType[Target](), Tag: `yaml:",inline"`}}
	for i, name := range probes.Names() {
		b, _ := probes.Lookup(name)
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Backend%d", i),
			Type: reflect.TypeOf(b.NewConfig()),
			Tag:  reflect.StructTag(fmt.Sprintf("yaml:%q", name)),
		})
	}
	return reflect.StructOf([]reflect.StructField{
		{Name: "Global", Type: reflectType[Global](), Tag: `yaml:"global"`},
		{Name: "Targets", Type: reflect.SliceOf(reflect.StructOf(fields)), Tag: `yaml:"targets"`},
	})
}

// structTypes maps the name yaml.v3 prints for each struct type reachable
// from t to its YAML keys, for the "did you mean" of an unknown key.
func structTypes(t reflect.Type) map[string][]string {
	out := map[string][]string{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		if _, done := out[t.String()]; done {
			return
		}
		fields := yamlFields(t)
		out[t.String()] = nil
		names := make([]string, 0, len(fields))
		for n, ft := range fields {
			names = append(names, n)
			walk(ft)
		}
		sort.Strings(names)
		out[t.String()] = names
	}
	walk(t)
	return out
}

// yamlFields maps YAML keys to field types, following `,inline` structs.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
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

// located is a node of the file with its path; key is set for a mapping key.
type located struct {
	path string
	node *yaml.Node
	key  bool
}

// nodeIndex is every node of the file by line, in document order. Aliases
// are not followed: a problem inside an anchor is reported where it is written.
type nodeIndex map[int][]located

func indexNodes(doc *yaml.Node) nodeIndex {
	idx := nodeIndex{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if path != "" { // the top mapping is checked before (Parse)
			idx[n.Line] = append(idx[n.Line], located{path: path, node: n})
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := join(path, k.Value)
				idx[k.Line] = append(idx[k.Line], located{path: p, node: k, key: true})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	for _, n := range doc.Content { // doc is the document node
		walk(n, "")
	}
	return idx
}

var (
	lineRE      = regexp.MustCompile(`^line (\d+)(?: column (\d+))?: (.*)$`)
	notFoundRE  = regexp.MustCompile(`^field (.+) not found in type (.+)$`)
	duplicateRE = regexp.MustCompile(`^mapping key (".*") already defined at line (\d+)$`)
	typeRE      = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// locate turns one of yaml.v3's messages ("line 7: field hots not found in
// type cassandra.Config") into a problem with its path and our wording.
// An Unmarshaler of ours may give "line L column C: ..." to name its node
// exactly (see probes/s3 Size).
func (idx nodeIndex) locate(m string, types map[string][]string) problem {
	sm := lineRE.FindStringSubmatch(m)
	if sm == nil {
		return problem{msg: m}
	}
	line, _ := strconv.Atoi(sm[1])
	msg := sm[3]
	find := func(match func(located) bool) (located, bool) {
		for _, l := range idx[line] {
			if match(l) {
				return l, true
			}
		}
		return located{}, false
	}
	if sm[2] != "" {
		col, _ := strconv.Atoi(sm[2])
		if l, ok := find(func(l located) bool { return !l.key && l.node.Column == col }); ok {
			return problem{path: l.path, line: line, msg: msg}
		}
	}
	if f := notFoundRE.FindStringSubmatch(msg); f != nil {
		if l, ok := find(func(l located) bool { return l.key && l.node.Value == f[1] }); ok {
			return problem{path: l.path, line: line, msg: unknownField(f[1], types[f[2]]), unknownKey: true}
		}
	}
	if f := duplicateRE.FindStringSubmatch(msg); f != nil {
		key, _ := strconv.Unquote(f[1])
		if l, ok := find(func(l located) bool { return l.key && l.node.Value == key }); ok {
			return problem{path: l.path, line: line, msg: fmt.Sprintf("duplicate key (first set on line %s)", f[2])}
		}
	}
	if f := typeRE.FindStringSubmatch(msg); f != nil {
		l, ok := find(func(l located) bool {
			return !l.key && l.node.ShortTag() == f[1] && (f[2] == "" || truncated(l.node.Value) == f[2])
		})
		if ok {
			return problem{path: l.path, line: line, msg: shapeMessage(msg, f[3], l.node, types)}
		}
	}
	if l, ok := find(func(l located) bool { return !l.key }); ok {
		return problem{path: l.path, line: line, msg: msg}
	}
	return problem{line: line, msg: msg}
}

// truncated is how yaml.v3 quotes a value in "cannot unmarshal".
func truncated(v string) string {
	if len(v) > 10 {
		return v[:7] + "..."
	}
	return v
}

// shapeMessage says "expected a list" or "expected a mapping" when a value
// has the wrong shape, and keeps yaml.v3's message for a wrong scalar.
func shapeMessage(msg, goType string, n *yaml.Node, types map[string][]string) string {
	_, isStruct := types[goType]
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "expected a list, got " + kindName(n)
	case strings.HasPrefix(goType, "map["), isStruct:
		return "expected a mapping, got " + kindName(n)
	}
	return msg
}

func unknownField(key string, names []string) string {
	if s := closest(key, names); s != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", key, s)
	}
	return fmt.Sprintf("unknown field %q (known: %s)", key, strings.Join(names, ", "))
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

// cleanYAMLError turns "yaml: line 3: did not find expected node content"
// into "line 3: did not find expected node content".
func cleanYAMLError(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
