package rls

import ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

// Load reads a configuration file or directory as LoadOptions.Load does,
// with the zero LoadOptions.
func Load(path string) (*Config, error) { return LoadOptions{}.Load(path) }

// Parse loads one file's contents, path naming it in messages, with the
// zero LoadOptions.
func Parse(path string, data []byte) (*Config, error) {
	c := &Config{Files: []string{path}, domains: map[string]*node{}, domainFile: map[string]string{}}
	if err := c.add(path, data); err != nil {
		return nil, err
	}
	return c, nil
}

// entryView is a request descriptor's entry, as the tests write one.
type entryView struct{ key, value string }

// lookupView is Config.lookup of entries written as entryViews.
func lookupView(c *Config, domain string, entries []entryView, buf []byte) (*Rule, []byte) {
	es := make([]*ratelimitv3.RateLimitDescriptor_Entry, len(entries))
	for i, e := range entries {
		es[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.key, Value: e.value}
	}
	return c.lookup(domain, es, buf)
}
