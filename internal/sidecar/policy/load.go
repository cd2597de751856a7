package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/clientip"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/readfile"
)

// MaxPolicies bounds a policies file: metrics carry a label per policy, so
// the file bounds their cardinality.
const MaxPolicies = 1000

// MaxFileBytes bounds a policies file's size, and so what parsing it takes:
// the YAML library holds about 100 times the file's bytes while it parses
// (a 1 MiB file of the worst shape, 127 MB). A thousand policies, each
// with plans and comments, fit in a fifth of it.
const MaxFileBytes = 1 << 20

// ErrInvalidFile matches every error about a policies file that does not
// load; the message reads "path:line: what is wrong".
var ErrInvalidFile = errors.New("policy: invalid policies file")

// FileError is a fault in a policies file, at a line.
type FileError struct {
	// Path is the file ("" when parsed from memory).
	Path string
	// Line is the line at fault, from 1; 0 when the fault is the whole
	// file.
	Line int
	// Msg says what is wrong.
	Msg string
}

// Error returns "PATH:LINE: MSG", without ":LINE" when Line is 0, and with
// "policies" for the path of a file parsed from memory.
func (e *FileError) Error() string {
	path := e.Path
	if path == "" {
		path = "policies"
	}
	if e.Line > 0 {
		return path + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return path + ": " + e.Msg
}

// Is reports whether target is ErrInvalidFile.
func (e *FileError) Is(target error) bool { return target == ErrInvalidFile }

// Load reads and validates the policies file at path: a regular file of at
// most MaxFileBytes (readfile.Read).
func Load(path string) (*File, error) {
	data, err := readfile.Read(path, MaxFileBytes)
	if err != nil {
		return nil, &FileError{Path: path, Msg: readfile.Reason(err)}
	}
	return Parse(path, data)
}

// Parse validates a policies file's contents (Load bounds their size);
// path is used in messages. Every error is a *FileError naming the line.
// Unknown fields are refused, so a typo never silently drops a limit.
func Parse(path string, data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(path, err)
	}
	p := parser{path: path}
	return p.file(&doc)
}

// yamlError turns the YAML library's "yaml: line N: msg" into a FileError.
func yamlError(path string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, m, ok := strings.Cut(rest, ": "); ok {
			if v, err := strconv.Atoi(n); err == nil {
				line, msg = v, m
			}
		}
	}
	return &FileError{Path: path, Line: line, Msg: "not valid YAML: " + msg}
}

type parser struct{ path string }

func (p *parser) errf(n *yaml.Node, format string, a ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &FileError{Path: p.path, Line: line, Msg: fmt.Sprintf(format, a...)}
}

// fields checks that n is a mapping of known, distinct keys and returns
// the value node of each.
func (p *parser) fields(n *yaml.Node, what string, known ...string) (map[string]*yaml.Node, error) {
	out, err := Fields(n, what, known...)
	if err != nil {
		return nil, p.errf(err.Node, "%s", err.Msg)
	}
	return out, nil
}

func (p *parser) file(doc *yaml.Node) (*File, error) {
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, p.errf(nil, "is empty: it needs a list of policies")
	}
	root, err := p.fields(doc.Content[0], "the file", "trusted_proxies", "policies")
	if err != nil {
		return nil, err
	}
	f := &File{Path: p.path, byName: map[string]*Policy{}}
	if n := root["trusted_proxies"]; n != nil {
		if n.Kind != yaml.SequenceNode {
			return nil, p.errf(n, "trusted_proxies must be a list of addresses or networks")
		}
		var list []string
		for _, e := range n.Content {
			e = Deref(e)
			if e.Kind != yaml.ScalarNode {
				return nil, p.errf(e, "trusted_proxies: each entry is an address or a network")
			}
			if _, err := clientip.ParseProxies(e.Value); err != nil {
				return nil, p.errf(e, "trusted_proxies: %q is not an address or network (10.0.0.0/8, ::1/128, 127.0.0.1)", e.Value)
			}
			list = append(list, e.Value)
		}
		f.Proxies, _ = clientip.ParseProxies(list...) // each parsed above
	}
	pn := root["policies"]
	if pn == nil {
		return nil, p.errf(doc.Content[0], "no policies: the file needs a policies list")
	}
	if pn.Kind != yaml.SequenceNode || len(pn.Content) == 0 {
		return nil, p.errf(pn, "policies must be a non-empty list")
	}
	if len(pn.Content) > MaxPolicies {
		return nil, p.errf(pn, "%d policies; at most %d", len(pn.Content), MaxPolicies)
	}
	f.Policies = make([]Policy, 0, len(pn.Content))
	lines := map[string]int{}
	for _, e := range pn.Content {
		pol, err := p.policy(Deref(e))
		if err != nil {
			return nil, err
		}
		if first, dup := lines[pol.Name]; dup {
			return nil, p.errf(e, "policy %q is defined twice (first at line %d)", pol.Name, first)
		}
		lines[pol.Name] = pol.Line
		f.Policies = append(f.Policies, pol)
	}
	for i := range f.Policies {
		f.byName[f.Policies[i].Name] = &f.Policies[i]
	}
	return f, nil
}

// MaxPolicyNameBytes is the longest policy name.
const MaxPolicyNameBytes = 64

func validName(s string) bool {
	if len(s) == 0 || len(s) > MaxPolicyNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func (p *parser) policy(n *yaml.Node) (Policy, error) {
	fs, err := p.fields(n, "a policy", "name", "match", "key", "algo", "limit", "scale", "hits", "plans", "missing_key", "key_list", "slices", "queue", "wait")
	if err != nil {
		return Policy{}, err
	}
	pol := Policy{Line: n.Line}
	nameN := fs["name"]
	if nameN == nil {
		return pol, p.errf(n, "a policy needs a name")
	}
	if nameN.Kind != yaml.ScalarNode || !validName(nameN.Value) {
		return pol, p.errf(nameN, "name %q: 1 to %d of A-Z a-z 0-9 _ . -", nameN.Value, MaxPolicyNameBytes)
	}
	pol.Name = nameN.Value
	in := "policy " + strconv.Quote(pol.Name)
	if m := fs["match"]; m != nil {
		if pol.Match, err = p.match(m, in); err != nil {
			return pol, err
		}
	}
	keyN := fs["key"]
	if keyN == nil {
		return pol, p.errf(n, "%s: key is required (ip, header:NAME, or a list of these)", in)
	}
	if pol.Key, err = p.key(keyN, in); err != nil {
		return pol, err
	}
	if mk := fs["missing_key"]; mk != nil {
		if pol.MissingKey, err = p.missingKey(mk, in, pol.Key); err != nil {
			return pol, err
		}
	}
	if kl := fs["key_list"]; kl != nil {
		switch {
		case kl.Kind == yaml.ScalarNode && kl.Value == "deny":
		case kl.Kind == yaml.ScalarNode && kl.Value == "whole":
			pol.KeyList = KeyListWhole
		default:
			return pol, p.errf(kl, "%s: key_list must be deny or whole", in)
		}
	}
	if a := fs["algo"]; a != nil {
		if a.Kind != yaml.ScalarNode {
			return pol, p.errf(a, "%s: algo must be one of %s", in, algoNames)
		}
		if pol.Algo, err = check.ParseAlgo(a.Value); err != nil {
			return pol, p.errf(a, "%s: algo %q: must be one of %s", in, a.Value, algoNames)
		}
	}
	limN := fs["limit"]
	if limN == nil {
		return pol, p.errf(n, "%s: limit is required", in)
	}
	maxLimit := check.MaxLimit
	if pol.Algo == rl.Log {
		maxLimit = check.MaxLogLimit
	}
	if pol.Limit, err = p.integer(limN, in+": limit", 0, maxLimit); err != nil {
		return pol, err
	}
	scaleN := fs["scale"]
	if scaleN == nil {
		return pol, p.errf(n, "%s: scale is required (a duration such as 1m, or milliseconds)", in)
	}
	if pol.Scale, err = p.scale(scaleN, in); err != nil {
		return pol, err
	}
	pol.Hits = 1
	if h := fs["hits"]; h != nil {
		if pol.Hits, err = p.integer(h, in+": hits", 1, check.MaxHits); err != nil {
			return pol, err
		}
	}
	if pl := fs["plans"]; pl != nil {
		if err := p.plans(pl, in, &pol, maxLimit); err != nil {
			return pol, err
		}
	}
	if err := p.shaping(fs, in, &pol); err != nil {
		return pol, err
	}
	return pol, nil
}

func (p *parser) match(n *yaml.Node, in string) (Match, error) {
	var m Match
	fs, err := p.fields(n, in+": match", "methods", "path_prefix", "host")
	if err != nil {
		return m, err
	}
	if ms := fs["methods"]; ms != nil {
		if ms.Kind != yaml.SequenceNode || len(ms.Content) == 0 {
			return m, p.errf(ms, "%s: match.methods must be a non-empty list such as [GET, POST]", in)
		}
		for _, e := range ms.Content {
			e = Deref(e)
			if e.Kind != yaml.ScalarNode || !isToken(e.Value) {
				return m, p.errf(e, "%s: match.methods: %q is not a method", in, e.Value)
			}
			m.Methods = append(m.Methods, strings.ToUpper(e.Value))
		}
	}
	if pp := fs["path_prefix"]; pp != nil {
		if pp.Kind != yaml.ScalarNode || !strings.HasPrefix(pp.Value, "/") {
			return m, p.errf(pp, "%s: match.path_prefix must start with /", in)
		}
		if why := checkPrefix(pp.Value); why != "" {
			return m, p.errf(pp, "%s: match.path_prefix %q %s", in, pp.Value, why)
		}
		m.PathPrefix = pp.Value
	}
	if h := fs["host"]; h != nil {
		if h.Kind != yaml.ScalarNode || h.Value == "" || strings.ContainsAny(h.Value, "/ \t") {
			return m, p.errf(h, "%s: match.host must be a host name such as example.com", in)
		}
		m.Host = strings.ToLower(h.Value)
	}
	return m, nil
}

func (p *parser) key(n *yaml.Node, in string) ([]KeySource, error) {
	var nodes []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		nodes = []*yaml.Node{n}
	case yaml.SequenceNode:
		if len(n.Content) == 0 || len(n.Content) > 8 {
			return nil, p.errf(n, "%s: key: a list of 1 to 8 sources", in)
		}
		nodes = n.Content
	default:
		return nil, p.errf(n, "%s: key must be ip, header:NAME or a list of these", in)
	}
	var out []KeySource
	for _, e := range nodes {
		k, err := p.source(Deref(e), in+": key")
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

func (p *parser) source(n *yaml.Node, what string) (KeySource, error) {
	if n.Kind != yaml.ScalarNode {
		return KeySource{}, p.errf(n, "%s must be ip or header:NAME", what)
	}
	if n.Value == "ip" {
		return KeySource{Kind: KeyIP}, nil
	}
	if h, ok := strings.CutPrefix(n.Value, "header:"); ok && isToken(h) {
		return KeySource{Kind: KeyHeader, Header: h}, nil
	}
	return KeySource{}, p.errf(n, "%s: %q must be ip or header:NAME (NAME an HTTP header name)", what, n.Value)
}

func (p *parser) plans(n *yaml.Node, in string, pol *Policy, maxLimit int64) error {
	fs, err := p.fields(n, in+": plans", "from", "limits")
	if err != nil {
		return err
	}
	from := fs["from"]
	if from == nil {
		return p.errf(n, "%s: plans.from is required (header:NAME)", in)
	}
	src, err := p.source(from, in+": plans.from")
	if err != nil {
		return err
	}
	if src.Kind != KeyHeader {
		return p.errf(from, "%s: plans.from must be header:NAME", in)
	}
	lim := fs["limits"]
	if lim == nil || lim.Kind != yaml.MappingNode || len(lim.Content) == 0 {
		return p.errf(n, "%s: plans.limits must map plan names to limits, such as {free: 2, pro: 50}", in)
	}
	plans := map[string]int64{}
	for i := 0; i+1 < len(lim.Content); i += 2 {
		k, v := lim.Content[i], Deref(lim.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return p.errf(k, "%s: plans.limits: a plan's name must be a non-empty string", in)
		}
		if _, dup := plans[k.Value]; dup {
			return p.errf(k, "%s: plans.limits: plan %q given twice", in, k.Value)
		}
		l, err := p.integer(v, in+": plans.limits."+k.Value, 0, maxLimit)
		if err != nil {
			return err
		}
		plans[k.Value] = l
	}
	pol.Plans, pol.PlanFrom = plans, src
	return nil
}

// integer reads a plain decimal integer from lo to hi.
func (p *parser) integer(n *yaml.Node, what string, lo, hi int64) (int64, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil && v >= lo && v <= hi {
			return v, nil
		}
	}
	return 0, p.errf(n, "%s: %q must be an integer from %d to %d", what, n.Value, lo, hi)
}

// scale reads a Go duration ("1m", "500ms") or an integer of milliseconds.
func (p *parser) scale(n *yaml.Node, in string) (int64, error) {
	bad := func() error {
		return p.errf(n, "%s: scale %q must be a duration of whole milliseconds (such as 1s, 1m, 1h) or an integer of milliseconds, from 1 ms to %d ms", in, n.Value, millis.MaxScale)
	}
	if n.Kind != yaml.ScalarNode {
		return 0, bad()
	}
	if n.Tag == "!!int" {
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil || v < 1 || v > millis.MaxScale {
			return 0, bad()
		}
		return v, nil
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d <= 0 || d%time.Millisecond != 0 || d.Milliseconds() > millis.MaxScale {
		return 0, bad()
	}
	return d.Milliseconds(), nil
}

// isToken reports whether s is an HTTP token (a header name or a method).
func isToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
