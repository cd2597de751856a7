package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/raterlimiter/raterlimiter/internal/cli"
	"github.com/raterlimiter/raterlimiter/internal/rls"
)

// rlsLoadFlags are the flags of how the Envoy rate limit service's
// configuration is read and answered, as envoyproxy/ratelimit's settings
// of the same names, and the check of one without serving.
type rlsLoadFlags struct {
	merge    bool
	check    string
	quota    bool
	metadata bool
	headers  bool
	// loads abandons a read that hangs, at start and on every reload.
	loads *fileLoads
}

func (f *rlsLoadFlags) register(fs *flag.FlagSet) {
	f.loads = &fileLoads{}
	fs.BoolVar(&f.merge, "rls-merge-domains", false, "let several files of -rls-config (or -check-rls-config) give one domain, their descriptors merged, as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true; a descriptor given twice is still refused")
	fs.BoolVar(&f.quota, "rls-quota-mode", false, "put every Envoy RLS rate limit in quota mode, as envoyproxy/ratelimit's QUOTA_MODE=true: over the limit the descriptor's status stays OK (the limit, nothing remaining), and -rls-response-metadata reports it")
	fs.BoolVar(&f.metadata, "rls-response-metadata", false, "add the request and its quota-mode violations to each Envoy RLS answer's dynamic_metadata, as envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA=true")
	fs.BoolVar(&f.headers, "rls-response-headers", false, "add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset of the descriptor nearest its limit to each Envoy RLS answer's response headers, which Envoy writes on the response to the client, as envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED=true")
	fs.StringVar(&f.check, "check-rls-config", "", "check this envoyproxy/ratelimit configuration (a YAML file or a directory of *.yaml files), print what is wrong with it (file:line: message) and exit: 0 when it loads, 2 when not")
}

// load reads the configuration at path as the flags say, abandoning a
// read that hangs (loadFile): a reload on SIGHUP or a change never waits
// on another for longer than fileTimeout.
func (f rlsLoadFlags) load(path string) (*rls.Config, error) {
	return loadFile(f.loads, path, func() (*rls.Config, error) { return rls.LoadOptions{MergeDomains: f.merge}.Load(path) })
}

// rlsConfigError is a configuration that does not load, as the command
// line reports it: exit status 2, the file's own message, and the flag
// that merges a domain given twice.
func (f rlsLoadFlags) rlsConfigError(err error) error {
	if errors.Is(err, rls.ErrDuplicateDomain) {
		return cli.Filef("%s (-rls-merge-domains merges them)", err.Error())
	}
	return cli.Filef("%s", err.Error())
}

// checkRLSConfig is -check-rls-config: it loads the configuration and
// says what it holds.
func (f rlsLoadFlags) checkRLSConfig(stdout io.Writer) error {
	c, err := f.load(f.check)
	if err != nil {
		return f.rlsConfigError(err)
	}
	fmt.Fprintf(stdout, "%s: ok, %d files, %d domains, %d rate limits\n", f.check, len(c.Files), len(c.Domains()), len(c.Rules()))
	for _, s := range c.Skipped {
		fmt.Fprintf(stdout, "not read: %s\n", s)
	}
	return nil
}
