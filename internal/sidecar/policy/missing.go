package policy

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// MissingAction is what a policy does with a request that lacks its key
// (a key header absent or empty).
type MissingAction uint8

const (
	// MissingDeny denies the request, counting nothing: the default, so
	// that leaving out a key never escapes a limit.
	MissingDeny MissingAction = iota
	// MissingSkip lets the policy not apply: the request is not counted
	// against it.
	MissingSkip
	// MissingFallback counts the request by MissingKey.Fallback instead
	// (such as the client's address), under counters of its own.
	MissingFallback
)

// MissingKey is a policy's missing_key: deny (the default), skip, or
// key:SOURCE (key:ip, key:header:NAME).
type MissingKey struct {
	// Action is what the request gets.
	Action MissingAction
	// Fallback is the key counted instead under MissingFallback.
	Fallback KeySource
}

// fallbackSuffix makes the counter name of a policy's fallback key: a
// client that sends its key header with the text of an address never
// shares the counter of the anonymous callers from that address. Policy
// names cannot hold '#', and the RLS's names start with "rls:".
const fallbackSuffix = "#missing_key"

// FallbackCounterID appends to dst the id under which rule name counts a
// fallback key (missing_key: key:SOURCE): CounterID's with the name
// followed by "#missing_key", which no policy's name can be.
func FallbackCounterID(dst []byte, name string, key []byte) []byte {
	dst = append(dst, 0)
	dst = append(dst, name...)
	dst = append(dst, fallbackSuffix...)
	dst = append(dst, 0)
	return append(dst, key...)
}

// missingKey reads a policy's missing_key.
func (p *parser) missingKey(n *yaml.Node, in string, key []KeySource) (MissingKey, error) {
	bad := func() error {
		return p.errf(n, "%s: missing_key must be deny, skip, key:ip or key:header:NAME", in)
	}
	if n.Kind != yaml.ScalarNode {
		return MissingKey{}, bad()
	}
	switch n.Value {
	case "deny":
		return MissingKey{Action: MissingDeny}, nil
	case "skip":
		return MissingKey{Action: MissingSkip}, nil
	}
	src, ok := strings.CutPrefix(n.Value, "key:")
	if !ok {
		return MissingKey{}, bad()
	}
	k, err := p.source(&yaml.Node{Kind: yaml.ScalarNode, Value: src, Line: n.Line, Column: n.Column}, in+": missing_key: key")
	if err != nil {
		return MissingKey{}, err
	}
	if len(key) == 1 && key[0] == k {
		return MissingKey{}, p.errf(n, "%s: missing_key: %s is the policy's own key", in, n.Value)
	}
	return MissingKey{Action: MissingFallback, Fallback: k}, nil
}
