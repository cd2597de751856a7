package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/rls"
)

// load reads the configuration at path as the flags say, abandoning a
// read that hangs (loadFile): with the same loads, a reload on SIGHUP or
// a change never waits on another for longer than fileTimeout.
func (f rlsFlags) load(loads *fileLoads, path string) (*rls.Config, error) {
	return loadFile(loads, path, func() (*rls.Config, error) { return rls.LoadOptions{MergeDomains: f.merge}.Load(path) })
}

// rlsConfigError is a configuration that does not load, as the command
// line reports it: exit status 2, the file's own message, and the flag
// that merges a domain given twice.
func rlsConfigError(err error) error {
	if errors.Is(err, rls.ErrDuplicateDomain) {
		return cli.Filef("%s (-rls-merge-domains merges them)", err.Error())
	}
	return cli.Filef("%s", err.Error())
}

// checkRLSConfig is -check-rls-config: it loads the configuration and
// says what it holds.
func (f rlsFlags) checkRLSConfig(stdout io.Writer) error {
	c, err := f.load(&fileLoads{}, f.check)
	if err != nil {
		return rlsConfigError(err)
	}
	fmt.Fprintf(stdout, "%s: ok, %d files, %d domains, %d rate limits\n", f.check, len(c.Files), len(c.Domains()), len(c.Rules()))
	for _, s := range c.Skipped {
		fmt.Fprintf(stdout, "not read: %s\n", s)
	}
	return nil
}
