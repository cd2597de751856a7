// Package rls serves Envoy's global rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC,
// from configuration files in envoyproxy/ratelimit's format, so an existing
// deployment can point Envoy at the sidecar and change nothing else.
//
// The descriptor tree of those files is matched as that service matches it;
// every rule it finds is a policy.Rule, decided by the same policy.Engine as
// the sidecar's gateway mode, on the memory or the Redis backend. One rule
// engine: the protocols differ only in how they find the rules.
package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/raterlimiter/raterlimiter/internal/yamlmap"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/policy"
)

// MaxRules bounds the rules of a configuration: each has its series in
// /metrics.
const MaxRules = 10_000

// ErrInvalidConfig matches every error about a configuration that does not
// load; the message names the file, the line and the field.
var ErrInvalidConfig = errors.New("rls: invalid configuration")

// ConfigError is a fault in a configuration file.
type ConfigError struct {
	// Path is the file.
	Path string
	// Line is the line at fault, from 1; 0 when the fault is the whole
	// file.
	Line int
	// Msg says what is wrong, naming the field.
	Msg string
}

// Error returns "PATH:LINE: MSG", without ":LINE" when Line is 0.
func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return e.Path + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Rule is a rate limit of the configuration: a policy.Rule (fixed window
// aligned to the epoch, as envoyproxy/ratelimit counts) and what the
// response reports of it.
type Rule struct {
	policy.Rule
	// Domain and Path name the rule in metrics: Path is the descriptor
	// keys from the domain down ("message_type_marketing.to_number").
	Domain, Path string
	// Limit is the rule as the response's current_limit reports it.
	Limit *rlspb.RateLimitResponse_RateLimit
	// LimitName is rate_limit.name, which another rule may replace.
	LimitName string
	// Replaces lists the names of the rules this one replaces.
	Replaces []string
}

// node is one level of a domain's descriptor tree.
type node struct {
	children  map[string]*node // by "key_value", or "key" for any value
	wildcards []wildcard       // children whose value holds '*', in file order
	rule      *Rule
}

type wildcard struct {
	key   string   // the child's key in children
	parts []string // key split at '*'
}

// Config is a loaded configuration: every domain's descriptor tree. It is
// read-only once loaded and safe for concurrent use.
type Config struct {
	// Files are the files it was read from.
	Files   []string
	domains map[string]*node
	rules   []*Rule
}

// Rules returns every rule, in the files' order.
func (c *Config) Rules() []*Rule { return c.rules }

// unitMillis is each unit's window, as envoyproxy/ratelimit divides time
// (a month is 30 days, a year 365).
var unitMillis = map[rlspb.RateLimitResponse_RateLimit_Unit]int64{
	rlspb.RateLimitResponse_RateLimit_SECOND: 1000,
	rlspb.RateLimitResponse_RateLimit_MINUTE: 60 * 1000,
	rlspb.RateLimitResponse_RateLimit_HOUR:   3600 * 1000,
	rlspb.RateLimitResponse_RateLimit_DAY:    86400 * 1000,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 86400 * 1000,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 86400 * 1000,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 86400 * 1000,
}

// Load reads a configuration file, or every *.yaml and *.yml file of a
// directory (one domain each, as envoyproxy/ratelimit's files).
func Load(path string) (*Config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &ConfigError{Path: path, Msg: "cannot be read: " + err.Error()}
	}
	var files []string
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, &ConfigError{Path: path, Msg: "cannot be read: " + err.Error()}
		}
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				files = append(files, filepath.Join(path, n))
			}
		}
		if len(files) == 0 {
			return nil, &ConfigError{Path: path, Msg: "holds no *.yaml file"}
		}
	} else {
		files = []string{path}
	}
	c := &Config{Files: files, domains: map[string]*node{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, &ConfigError{Path: f, Msg: "cannot be read: " + err.Error()}
		}
		if err := c.add(f, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Parse loads one file's contents (path names it in messages): for a
// configuration that does not live in a file (embedded in the program or
// generated), as Options.Config or what Options.Load returns.
func Parse(path string, data []byte) (*Config, error) {
	c := &Config{Files: []string{path}, domains: map[string]*node{}}
	if err := c.add(path, data); err != nil {
		return nil, err
	}
	return c, nil
}

type loader struct {
	path string
	c    *Config
}

func (l *loader) errf(n *yaml.Node, format string, a ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &ConfigError{Path: l.path, Line: line, Msg: fmt.Sprintf(format, a...)}
}

// fields checks that n is a mapping of known, distinct keys and returns
// the value node of each. Envoy's fields this server does not implement are
// named as such rather than as unknown.
func (l *loader) fields(n *yaml.Node, what string, known ...string) (map[string]*yaml.Node, error) {
	out, err := yamlmap.Fields(n, what, known...)
	switch {
	case err == nil:
		return out, nil
	case err.Unknown == "quota_mode", err.Unknown == "share_threshold":
		return nil, l.errf(err.Node, "%s: field %q is not supported", what, err.Unknown)
	}
	return nil, l.errf(err.Node, "%s", err.Msg)
}

func scalar(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

func (c *Config) add(path string, data []byte) error {
	l := &loader{path: path, c: c}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return &ConfigError{Path: path, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return &ConfigError{Path: path, Msg: "is empty: it needs a domain and descriptors"}
	}
	root, err := l.fields(doc.Content[0], "the file", "domain", "descriptors")
	if err != nil {
		return err
	}
	domain, ok := scalar(root["domain"])
	if !ok || domain == "" {
		return l.errf(doc.Content[0], "domain: must not be empty")
	}
	if _, dup := c.domains[domain]; dup {
		return l.errf(root["domain"], "domain %q is defined twice", domain)
	}
	top := &node{children: map[string]*node{}}
	if d := root["descriptors"]; d != nil {
		if err := l.descriptors(top, d, domain, ""); err != nil {
			return err
		}
	}
	c.domains[domain] = top
	return nil
}

func (l *loader) descriptors(parent *node, list *yaml.Node, domain, path string) error {
	if list.Kind != yaml.SequenceNode {
		return l.errf(list, "descriptors must be a list")
	}
	for _, e := range list.Content {
		fs, err := l.fields(e, "a descriptor", "key", "value", "rate_limit", "descriptors", "shadow_mode",
			"detailed_metric", "value_to_metric", "metadata")
		if err != nil {
			return err
		}
		key, _ := scalar(fs["key"])
		if key == "" {
			return l.errf(e, "a descriptor: key must not be empty")
		}
		value, _ := scalar(fs["value"])
		final := key
		if value != "" {
			final += "_" + value
		}
		full := final
		if path != "" {
			full = path + "." + final
		}
		if _, dup := parent.children[final]; dup {
			return l.errf(fs["key"], "duplicate descriptor %q in domain %q", full, domain)
		}
		n := &node{children: map[string]*node{}}
		shadow, err := l.boolField(fs, "shadow_mode")
		if err != nil {
			return err
		}
		if _, err := l.boolField(fs, "detailed_metric"); err != nil {
			return err
		}
		if _, err := l.boolField(fs, "value_to_metric"); err != nil {
			return err
		}
		if rlN := fs["rate_limit"]; rlN != nil {
			if n.rule, err = l.rule(rlN, domain, full, shadow); err != nil {
				return err
			}
		}
		if d := fs["descriptors"]; d != nil {
			if err := l.descriptors(n, d, domain, full); err != nil {
				return err
			}
		}
		parent.children[final] = n
		if strings.Contains(final, "*") {
			parent.wildcards = append(parent.wildcards, wildcard{key: final, parts: strings.Split(final, "*")})
		}
	}
	return nil
}

func (l *loader) boolField(fs map[string]*yaml.Node, name string) (bool, error) {
	n := fs[name]
	if n == nil {
		return false, nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		return n.Value == "true" || n.Value == "True" || n.Value == "TRUE", nil
	}
	return false, l.errf(n, "%s must be true or false", name)
}

func (l *loader) rule(n *yaml.Node, domain, path string, shadow bool) (*Rule, error) {
	fs, err := l.fields(n, "rate_limit", "unit", "requests_per_unit", "unlimited", "name", "replaces")
	if err != nil {
		return nil, err
	}
	if len(l.c.rules) == MaxRules {
		return nil, l.errf(n, "more than %d rate limits", MaxRules)
	}
	r := &Rule{Domain: domain, Path: path}
	r.Shadow = shadow
	r.Algo = rl.Fixed
	r.Name = ruleName(domain, path)
	if r.Unlimited, err = l.boolField(fs, "unlimited"); err != nil {
		return nil, err
	}
	unitS, hasUnit := scalar(fs["unit"])
	unitV, known := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unitS)]
	unit := rlspb.RateLimitResponse_RateLimit_Unit(unitV)
	switch {
	case r.Unlimited && hasUnit && known && unit != rlspb.RateLimitResponse_RateLimit_UNKNOWN:
		return nil, l.errf(fs["unit"], "rate_limit: unit must not be given with unlimited: true")
	case !r.Unlimited && (!known || unit == rlspb.RateLimitResponse_RateLimit_UNKNOWN):
		return nil, l.errf(n, "rate_limit: unit %q must be one of second, minute, hour, day, week, month, year", unitS)
	}
	var rpu int64
	if v := fs["requests_per_unit"]; v != nil {
		if v.Tag != "!!int" {
			return nil, l.errf(v, "rate_limit: requests_per_unit must be an integer from 0 to %d", rl.MaxLimit)
		}
		if rpu, err = strconv.ParseInt(v.Value, 10, 64); err != nil || rpu < 0 || rpu > rl.MaxLimit {
			return nil, l.errf(v, "rate_limit: requests_per_unit must be an integer from 0 to %d", rl.MaxLimit)
		}
	} else if !r.Unlimited {
		return nil, l.errf(n, "rate_limit: requests_per_unit is required")
	}
	r.LimitName, _ = scalar(fs["name"])
	if rep := fs["replaces"]; rep != nil {
		if rep.Kind != yaml.SequenceNode {
			return nil, l.errf(rep, "rate_limit: replaces must be a list of {name: NAME}")
		}
		for _, e := range rep.Content {
			efs, err := l.fields(e, "replaces", "name")
			if err != nil {
				return nil, err
			}
			name, _ := scalar(efs["name"])
			switch {
			case name == "":
				return nil, l.errf(e, "replaces: an entry needs a name")
			case name == r.LimitName:
				return nil, l.errf(e, "replaces: a rate limit cannot replace itself (%q)", name)
			}
			r.Replaces = append(r.Replaces, name)
		}
	}
	if !r.Unlimited {
		r.Limit = &rlspb.RateLimitResponse_RateLimit{Name: r.LimitName, RequestsPerUnit: uint32(rpu), Unit: unit}
		r.Rule.Limit, r.Scale = rpu, unitMillis[unit]
	}
	l.c.rules = append(l.c.rules, r)
	return r, nil
}

// ruleName is a rule's name in counter ids: "rls:" (never in a policies
// file's names), the domain and the descriptor path; a long one is hashed
// to fit policy.MaxRuleNameBytes.
func ruleName(domain, path string) string {
	n := "rls:" + domain + "." + path
	if len(n) <= policy.MaxRuleNameBytes && !strings.ContainsRune(n, 0) {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return "rls:#" + hex.EncodeToString(sum[:])
}

// lookup finds the rule of a request descriptor in domain, as
// envoyproxy/ratelimit does: level by level, "key_value" first, then a
// wildcard value, then "key" for any value; the rule counts only when the
// descriptor's last entry reaches it. buf is scratch for the level keys.
func (c *Config) lookup(domain string, entries []entryView, buf []byte) (*Rule, []byte) {
	n := c.domains[domain]
	if n == nil {
		return nil, buf
	}
	var found *Rule
	for i, e := range entries {
		buf = append(append(append(buf[:0], e.key...), '_'), e.value...)
		next := n.children[string(buf)]
		if next == nil {
			for _, w := range n.wildcards {
				if wildcardMatch(w.parts, buf) {
					next = n.children[w.key]
					break
				}
			}
		}
		if next == nil {
			next = n.children[e.key]
		}
		if next != nil && next.rule != nil && i == len(entries)-1 {
			found = next.rule
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		n = next
	}
	return found, buf
}

// wildcardMatch reports whether s matches the pattern split at '*' into
// parts: the first part a prefix, the last a suffix, the others in order
// between them.
func wildcardMatch(parts []string, s []byte) bool {
	if len(parts) == 1 {
		return string(s) == parts[0]
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || string(s[:len(first)]) != first || string(s[len(s)-len(last):]) != last {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(string(rest), p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// entryView is a request descriptor's entry.
type entryView struct{ key, value string }
