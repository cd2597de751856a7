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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/readfile"
)

// MaxRules bounds the rules of a configuration: each has its series in
// /metrics.
const MaxRules = 10_000

// MaxFileBytes bounds one file of a configuration, as policy.MaxFileBytes
// bounds a policies file and for the same reason; the files of a directory
// are parsed one after the other.
const MaxFileBytes = 1 << 20

// MaxConfigBytes bounds the files of a directory together.
const MaxConfigBytes = 16 << 20

// ErrInvalidConfig matches every error about a configuration that does not
// load; the message names the file, the line and the field.
var ErrInvalidConfig = errors.New("rls: invalid configuration")

// ErrDuplicateDomain matches the error about a domain given in two files
// when LoadOptions.MergeDomains is off (it matches ErrInvalidConfig too).
var ErrDuplicateDomain = errors.New("rls: a domain is given in two files")

// ConfigError is a fault in a configuration file.
type ConfigError struct {
	// Path is the file.
	Path string
	// Line is the line at fault, from 1; 0 when the fault is the whole
	// file.
	Line int
	// Msg says what is wrong, naming the field.
	Msg string

	dupDomain bool
}

// Error returns "PATH:LINE: MSG", without ":LINE" when Line is 0.
func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return e.Path + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Is reports whether target is ErrInvalidConfig, or ErrDuplicateDomain for
// a domain given twice.
func (e *ConfigError) Is(target error) bool {
	return target == ErrInvalidConfig || e.dupDomain && target == ErrDuplicateDomain
}

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
	// Quota is quota_mode: over the limit, the descriptor's status stays
	// OK (reporting the limit and nothing remaining) and the request is
	// not refused for it; its hits are counted as any rule's.
	Quota bool
	// shared holds, for each entry of a request that reaches this rule,
	// the "key_value*" of its level when that level has share_threshold,
	// "" otherwise; nil when no level has it. Such an entry's value
	// counts as the pattern's, so every value the wildcard matches shares
	// one counter.
	shared []string
}

// node is one level of a domain's descriptor tree.
type node struct {
	children map[string]*node // by "key_value", or "key" for any value
	// wildcards are the keys of children ending in '*', in file order:
	// what comes before the '*' is a prefix of "key_value".
	wildcards []string
	rule      *Rule
}

// Config is a loaded configuration: every domain's descriptor tree. It is
// read-only once loaded and safe for concurrent use.
type Config struct {
	// Files are the files it was read from.
	Files []string
	// Skipped are the entries of a configuration directory that were not
	// read, each "PATH: why" (see LoadOptions.Load); a Kubernetes volume's
	// own entries ("..data" and the like) are not listed.
	Skipped []string
	domains map[string]*node
	rules   []*Rule
	// domainFile is the file each domain was first given in.
	domainFile map[string]string
	merge      bool
}

// Rules returns every rule, in the files' order.
func (c *Config) Rules() []*Rule { return c.rules }

// Domains returns the names of the domains, sorted.
func (c *Config) Domains() []string { return slices.Sorted(maps.Keys(c.domains)) }

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

// LoadOptions configures Load. The zero value loads as envoyproxy/ratelimit
// does by default.
type LoadOptions struct {
	// MergeDomains lets several files give one domain, as
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true: each file's
	// descriptors are added to the domain's, in the files' order, and a
	// descriptor given twice at one level is still refused. Off, a domain
	// given twice is refused (ErrDuplicateDomain).
	MergeDomains bool
}

// Load reads a configuration file, or the *.yaml and *.yml files of a
// directory, in name order. Of a directory, dot files are never read (as
// envoyproxy/ratelimit's RUNTIME_IGNOREDOTFILES=true: a Kubernetes
// volume's ..data, an editor's swap file), nor subdirectories, nor files
// of other names: each is listed in Config.Skipped. Each file read is a
// regular file of at most MaxFileBytes (readfile.Read), and a directory's
// files hold at most MaxConfigBytes.
func (o LoadOptions) Load(path string) (*Config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &ConfigError{Path: path, Msg: "cannot be read: " + err.Error()}
	}
	var files, skipped []string
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, &ConfigError{Path: path, Msg: "cannot be read: " + err.Error()}
		}
		for _, e := range entries {
			n, full := e.Name(), filepath.Join(path, e.Name())
			if why := skipWhy(full, n); why != "" {
				if !strings.HasPrefix(n, "..") {
					skipped = append(skipped, full+": "+why)
				}
				continue
			}
			files = append(files, full)
		}
		if len(files) == 0 {
			return nil, &ConfigError{Path: path, Msg: "holds no *.yaml or *.yml file"}
		}
	} else {
		files = []string{path}
	}
	c := &Config{Files: files, Skipped: skipped, domains: map[string]*node{}, domainFile: map[string]string{}, merge: o.MergeDomains}
	var total int64
	for _, f := range files {
		data, err := readfile.Read(f, MaxFileBytes)
		if err != nil {
			return nil, &ConfigError{Path: f, Msg: readfile.Reason(err)}
		}
		if total += int64(len(data)); total > MaxConfigBytes {
			return nil, &ConfigError{Path: path, Msg: fmt.Sprintf("its files hold more than %d bytes together", MaxConfigBytes)}
		}
		if err := c.add(f, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// skipWhy says why the directory entry name (at full) is not read as a
// configuration file, or "" when it is.
func skipWhy(full, name string) string {
	if strings.HasPrefix(name, ".") {
		return "a dot file"
	}
	if fi, err := os.Stat(full); err == nil && fi.IsDir() { // a symlink too
		return "a directory: subdirectories are not read"
	}
	if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
		return "not *.yaml or *.yml"
	}
	return ""
}

type loader struct {
	path string
	c    *Config
	// work is what the file may still expand to: descriptors, and fields
	// merge keys copy. Aliases can make a small file a huge tree.
	work int
}

// maxWork bounds the descriptors and merged fields of one file.
const maxWork = 1 << 18

// spend takes one unit of work, failing at n once there is none left.
func (l *loader) spend(n *yaml.Node) error {
	if l.work--; l.work < 0 {
		return l.errf(n, "the file expands to more than %d descriptors and merged fields (aliases?)", maxWork)
	}
	return nil
}

func (l *loader) errf(n *yaml.Node, format string, a ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &ConfigError{Path: l.path, Line: line, Msg: fmt.Sprintf(format, a...)}
}

// fields checks that n is a mapping (merge keys "<<" applied) of known,
// distinct keys and returns the value node of each. A name
// envoyproxy/ratelimit knows at another level is named as misplaced.
func (l *loader) fields(n *yaml.Node, what string, known ...string) (map[string]*yaml.Node, error) {
	n, err := l.merged(n)
	if err != nil {
		return nil, err
	}
	out, ferr := policy.Fields(n, what, known...)
	switch {
	case ferr == nil:
		return out, nil
	case peerKeys[ferr.Unknown]:
		return nil, l.errf(ferr.Node, "%s: field %q does not belong here (envoyproxy/ratelimit ignores it here, so the file would not do what it says)", what, ferr.Unknown)
	}
	return nil, l.errf(ferr.Node, "%s", ferr.Msg)
}

// peerKeys are the names envoyproxy/ratelimit's loader accepts at any
// level (it ignores them where they mean nothing).
var peerKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true, "unit": true,
	"requests_per_unit": true, "unlimited": true, "shadow_mode": true, "quota_mode": true, "name": true,
	"replaces": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true,
}

// add loads one file's contents, which Load has bounded by MaxFileBytes.
func (c *Config) add(path string, data []byte) error {
	l := &loader{path: path, c: c, work: maxWork}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return &ConfigError{Path: path, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return &ConfigError{Path: path, Msg: "is empty: it needs a domain and descriptors"}
	}
	if err := l.scalars(doc.Content[0], 0); err != nil {
		return err
	}
	root, err := l.fields(doc.Content[0], "the file", "domain", "descriptors")
	if err != nil {
		return err
	}
	domain, err := l.str(root, "domain")
	if err != nil {
		return err
	}
	if domain == "" {
		return l.errf(doc.Content[0], "domain: must not be empty")
	}
	top := c.domains[domain]
	switch {
	case top == nil:
		top = &node{children: map[string]*node{}}
		c.domainFile[domain] = path
	case !c.merge:
		return &ConfigError{Path: path, Line: root["domain"].Line, dupDomain: true,
			Msg: fmt.Sprintf("domain %q is defined twice (first in %s); merging one domain's files is an option", domain, c.domainFile[domain])}
	}
	if err := l.descriptors(top, root["descriptors"], domain, "", nil); err != nil {
		return err
	}
	c.domains[domain] = top
	return nil
}

// descriptors loads list (nil or null: none) under parent. shared is the
// share_threshold pattern of each level above (see Rule.shared).
func (l *loader) descriptors(parent *node, list *yaml.Node, domain, path string, shared []string) error {
	if isNull(list) {
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		return l.errf(list, "descriptors must be a list")
	}
	for _, e := range list.Content {
		if err := l.spend(e); err != nil {
			return err
		}
		fs, err := l.fields(e, "a descriptor", "key", "value", "rate_limit", "descriptors", "shadow_mode",
			"quota_mode", "detailed_metric", "value_to_metric", "share_threshold")
		if err != nil {
			return err
		}
		key, err := l.str(fs, "key")
		if err != nil {
			return err
		}
		if key == "" {
			return l.errf(e, "a descriptor: key must not be empty")
		}
		value, err := l.str(fs, "value")
		if err != nil {
			return err
		}
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
		var flags [5]bool
		for i, name := range []string{"shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold"} {
			if flags[i], err = l.boolField(fs, name); err != nil {
				return err
			}
		}
		shadow, quota, share := flags[0], flags[1], flags[4]
		wild := strings.HasSuffix(final, "*")
		if share && !wild {
			return l.errf(fs["share_threshold"], "a descriptor: share_threshold needs a value ending in '*' (a wildcard), not %q", final)
		}
		level := append(slices.Clip(shared), "")
		if share {
			level[len(level)-1] = final
		}
		if rlN := fs["rate_limit"]; !isNull(rlN) {
			if n.rule, err = l.rule(rlN, domain, full, shadow); err != nil {
				return err
			}
			n.rule.Quota = quota
			if slices.ContainsFunc(level, func(s string) bool { return s != "" }) {
				n.rule.shared = level
			}
		}
		if err := l.descriptors(n, fs["descriptors"], domain, full, level); err != nil {
			return err
		}
		parent.children[final] = n
		if wild {
			parent.wildcards = append(parent.wildcards, final)
		}
	}
	return nil
}

func (l *loader) rule(n *yaml.Node, domain, path string, shadow bool) (*Rule, error) {
	fs, err := l.fields(n, "rate_limit", "unit", "requests_per_unit", "unlimited", "name", "replaces")
	if err != nil {
		return nil, err
	}
	if len(l.c.rules) == MaxRules {
		return nil, l.errf(n, "more than %d rate limits", MaxRules)
	}
	r := &Rule{Rule: policy.Rule{Name: ruleName(domain, path), Algo: rl.Fixed, Shadow: shadow}, Domain: domain, Path: path}
	if r.Unlimited, err = l.boolField(fs, "unlimited"); err != nil {
		return nil, err
	}
	unitS, err := l.str(fs, "unit")
	if err != nil {
		return nil, err
	}
	unitV, known := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unitS)]
	unit := rlspb.RateLimitResponse_RateLimit_Unit(unitV)
	valid := known && unit != rlspb.RateLimitResponse_RateLimit_UNKNOWN
	switch {
	case r.Unlimited && valid:
		return nil, l.errf(fs["unit"], "rate_limit: unit must not be given with unlimited: true")
	case !r.Unlimited && !valid:
		return nil, l.errf(n, "rate_limit: unit %q must be one of second, minute, hour, day, week, month, year", unitS)
	}
	// An absent requests_per_unit is 0, as envoyproxy/ratelimit reads it:
	// every hit is over the limit.
	rpu, err := l.count(fs, "requests_per_unit", "rate_limit: requests_per_unit", check.MaxLimit)
	if err != nil {
		return nil, err
	}
	if r.LimitName, err = l.str(fs, "name"); err != nil {
		return nil, err
	}
	if rep := fs["replaces"]; !isNull(rep) {
		if rep.Kind != yaml.SequenceNode {
			return nil, l.errf(rep, "rate_limit: replaces must be a list of {name: NAME}")
		}
		for _, e := range rep.Content {
			efs, err := l.fields(e, "replaces", "name")
			if err != nil {
				return nil, err
			}
			name, err := l.str(efs, "name")
			if err != nil {
				return nil, err
			}
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
// envoyproxy/ratelimit does: level by level, "key_value" first, then the
// first wildcard ("key_value*", or "key*") whose prefix "key_value" starts
// with, then "key" for any value; the rule counts only when the
// descriptor's last entry reaches it. buf is scratch for the level keys.
func (c *Config) lookup(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry, buf []byte) (*Rule, []byte) {
	n := c.domains[domain]
	if n == nil {
		return nil, buf
	}
	var found *Rule
	for i, e := range entries {
		buf = append(append(append(buf[:0], e.Key...), '_'), e.Value...)
		next := n.children[string(buf)]
		if next == nil {
			for _, w := range n.wildcards {
				if prefix := w[:len(w)-1]; len(buf) >= len(prefix) && string(buf[:len(prefix)]) == prefix {
					next = n.children[w]
					break
				}
			}
		}
		if next == nil {
			next = n.children[e.Key]
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

// sharedValue is the value entry i of a request counts under for r: the
// share_threshold pattern's value (what follows "key_" in it) when its
// level has one, else the entry's own value.
func (r *Rule) sharedValue(i int, key, value string) string {
	if i < len(r.shared) && r.shared[i] != "" {
		return strings.TrimPrefix(r.shared[i], key+"_")
	}
	return value
}

// Removed returns the rules of old that new no longer has, each named by
// its domain and descriptor path ("domain.key_value.key"), in old's
// order: what a reload from old to new stops limiting.
func Removed(old, new *Config) []string {
	if old == nil {
		return nil
	}
	kept := make(map[string]bool, len(new.rules))
	for _, r := range new.rules {
		kept[r.Domain+"."+r.Path] = true
	}
	var gone []string
	for _, r := range old.rules {
		if n := r.Domain + "." + r.Path; !kept[n] {
			gone = append(gone, n)
			kept[n] = true // once
		}
	}
	return gone
}
