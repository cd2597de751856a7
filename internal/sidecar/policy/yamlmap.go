package policy

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The mappings of the project's YAML files (the policies file, the Envoy
// RLS configuration) are read strictly: known names only, each once,
// aliases followed. Each file's loader makes its own error of a
// MappingFault, with the file and the line.

// MappingFault is a mapping that is not as the loader wants it: Node is
// where (nil when there is no node), Msg what is wrong. Unknown is the name
// that is not among the known ones, if that is the fault.
type MappingFault struct {
	Node    *yaml.Node
	Msg     string
	Unknown string
}

// Deref follows n's aliases.
func Deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// Fields checks that n is a mapping whose names are among known, each
// given once, and returns the value node of each (aliases followed). what
// names the mapping in the error's message.
func Fields(n *yaml.Node, what string, known ...string) (map[string]*yaml.Node, *MappingFault) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, &MappingFault{Node: n, Msg: what + " must be a mapping"}
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, &MappingFault{Node: k, Msg: what + ": keys must be names"}
		}
		if !slices.Contains(known, k.Value) {
			return nil, &MappingFault{Node: k, Unknown: k.Value,
				Msg: fmt.Sprintf("%s: unknown field %q (known: %s)", what, k.Value, strings.Join(known, ", "))}
		}
		if _, dup := out[k.Value]; dup {
			return nil, &MappingFault{Node: k, Msg: fmt.Sprintf("%s: field %q given twice", what, k.Value)}
		}
		out[k.Value] = Deref(v)
	}
	return out, nil
}
