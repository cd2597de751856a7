package rls

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// The configuration files are read as envoyproxy/ratelimit reads them,
// with YAML 1.1's scalars (its parser is gopkg.in/yaml.v2): null is an
// absent field, yes/no/on/off are booleans, 010 is octal and 1_000 a
// thousand, "<<" merges a mapping in; and what it refuses anywhere in a
// file (a number with a fraction or an exponent, an integer past 64 bits)
// is refused here too.

// isNull reports whether n is absent or null (~, null, or nothing).
func isNull(n *yaml.Node) bool {
	n = policy.Deref(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// str is the string field name of fs: "" when absent or null; any other
// scalar as written (a number or a boolean too, as envoyproxy/ratelimit
// reads it into a string).
func (l *loader) str(fs map[string]*yaml.Node, name string) (string, error) {
	n := fs[name]
	if isNull(n) {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", l.errf(n, "%s must be a string", name)
	}
	return n.Value, nil
}

// yaml11Bools are YAML 1.1's booleans beyond true and false.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// boolField is the boolean field name of fs: false when absent or null;
// true, false and YAML 1.1's yes, no, on, off, y, n unquoted.
func (l *loader) boolField(fs map[string]*yaml.Node, name string) (bool, error) {
	n := fs[name]
	if isNull(n) {
		return false, nil
	}
	if n.Kind == yaml.ScalarNode {
		switch {
		case n.Tag == "!!bool":
			return strings.EqualFold(n.Value, "true"), nil
		case n.Tag == "!!str" && n.Style == 0:
			if b, ok := yaml11Bools[n.Value]; ok {
				return b, nil
			}
		}
	}
	return false, l.errf(n, "%s must be true or false", name)
}

// yaml11Int parses an integer as YAML 1.1 does: underscores ignored, 0x
// hexadecimal, 0b binary, 0o or a leading 0 octal, an optional sign.
func yaml11Int(s string) (int64, bool) {
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
	return v, err == nil
}

// count is the integer field name of fs, from 0 to limit: 0 when absent
// or null.
func (l *loader) count(fs map[string]*yaml.Node, name, what string, limit int64) (int64, error) {
	n := fs[name]
	if isNull(n) {
		return 0, nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		if v, ok := yaml11Int(n.Value); ok && v >= 0 && v <= limit {
			return v, nil
		}
	}
	return 0, l.errf(n, "%s must be an integer from 0 to %d", what, limit)
}

// scalars refuses what envoyproxy/ratelimit refuses in any field: a
// number with a fraction or an exponent, an integer that does not fit in
// 64 bits. depth bounds the walk (an alias is not followed: its anchor is
// walked where it stands).
func (l *loader) scalars(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return l.errf(n, "nested more than %d levels", maxDepth)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		_, isInt := yaml11Int(n.Value)
		if n.Tag == "!!float" || n.Tag == "!!int" && !isInt {
			return l.errf(n, "%s: a number with a fraction or an exponent, or past 64 bits, is refused (as envoyproxy/ratelimit refuses it); quote it if it is a value", n.Value)
		}
	case yaml.MappingNode, yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			if err := l.scalars(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxDepth bounds a file's nesting.
const maxDepth = 256

// merged returns n with its merge keys applied: "<<: *anchor" (or a list
// of them) adds the anchored mapping's fields that n does not give itself,
// the first mapping of a list winning. n itself is not changed.
func (l *loader) merged(n *yaml.Node) (*yaml.Node, error) {
	n = policy.Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return n, nil
	}
	at := -1
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			at = i
			break
		}
	}
	if at < 0 {
		return n, nil
	}
	out := *n
	out.Content = nil
	given := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !(k.Kind == yaml.ScalarNode && k.Tag == "!!merge") {
			out.Content = append(out.Content, k, n.Content[i+1])
			given[k.Value] = true
		}
	}
	var from []*yaml.Node
	switch v := policy.Deref(n.Content[at+1]); {
	case v != nil && v.Kind == yaml.MappingNode:
		from = []*yaml.Node{v}
	case v != nil && v.Kind == yaml.SequenceNode:
		from = v.Content
	default:
		return nil, l.errf(n.Content[at], "<<: must merge a mapping or a list of mappings")
	}
	for _, m := range from {
		m, err := l.merged(m)
		if err != nil {
			return nil, err
		}
		if m == nil || m.Kind != yaml.MappingNode {
			return nil, l.errf(n.Content[at], "<<: must merge a mapping or a list of mappings")
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if err := l.spend(m.Content[i]); err != nil {
				return nil, err
			}
			if k := m.Content[i]; !given[k.Value] {
				out.Content = append(out.Content, k, m.Content[i+1])
				given[k.Value] = true
			}
		}
	}
	return &out, nil
}
