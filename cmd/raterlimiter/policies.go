package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// policyFlags are the flags of gateway mode.
type policyFlags struct {
	path        string
	only        bool
	denyStatus  int
	authHeaders string
	check       string
}

// gateway is -auth-headers, validated.
func (f *policyFlags) gateway() policy.Gateway {
	g, _ := policy.ParseGateway(f.authHeaders)
	return g
}

// policyLoader loads the policies file at path (nil when path is ""),
// abandoning a read that hangs (loadFile). The start, SIGHUP, POST /reload
// and a change of the file all load through it (api.Config.LoadPolicies),
// so none of them waits on another for longer than fileTimeout.
func policyLoader(path string) func() (*policy.File, error) {
	if path == "" {
		return nil
	}
	loads := &fileLoads{}
	return func() (*policy.File, error) {
		return loadFile(loads, path, func() (*policy.File, error) { return policy.Load(path) })
	}
}

// loadPolicies loads the policies at start (none when load is nil): a file
// that does not load stops the start (exit 2) with the file's own message.
func loadPolicies(load func() (*policy.File, error)) (*policy.File, error) {
	if load == nil {
		return nil, nil
	}
	f, err := load()
	if err != nil {
		return nil, cli.Filef("%s", err.Error())
	}
	return f, nil
}

// checkPolicies is -check-policies: it loads the file and says so.
func checkPolicies(path string, stdout io.Writer) error {
	f, err := loadPolicies(policyLoader(path))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok, %d policies\n", path, len(f.Policies))
	return nil
}

// watchPolicies logs the policies loaded at start, warns when /auth will
// refuse to answer (without -auth-headers only checks by policy name are
// served), and reloads the policies on every SIGHUP and, with watch, when
// the file changes, until ctx ends. A file that does not load keeps the
// rules in force (the server logs and counts it).
func watchPolicies(ctx context.Context, s *api.Server, f policyFlags, n int, watch bool, logger *slog.Logger) {
	logger.Info("policies loaded", "file", f.path, "policies", n, "policies_only", f.only, "auth_headers", f.authHeaders)
	if f.gateway() == policy.GatewayUnset {
		logger.Warn("no -auth-headers: /auth answers 503 until it names the proxy in front (nginx, caddy or traefik); checks by policy name are served")
	}
	onReload(ctx, logger, watch, []string{f.path}, func(why string) {
		if err := s.ReloadPolicies(); err != nil && !errors.Is(err, api.ErrNoPolicies) {
			logger.Warn(why+": policies not reloaded", "err", err)
		}
	})
}
