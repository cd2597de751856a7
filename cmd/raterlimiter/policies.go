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

// warnWithoutGateway says at start that /auth will refuse to answer: a
// policies file without -auth-headers serves checks by policy name only.
func warnWithoutGateway(f policyFlags, logger *slog.Logger) {
	if f.path != "" && f.gateway() == policy.GatewayUnset {
		logger.Warn("no -auth-headers: /auth answers 503 until it names the proxy in front (nginx, caddy or traefik); checks by policy name are served")
	}
}

// loadPolicyFile loads the policies file at path, abandoning a read that
// hangs (loadFile).
func loadPolicyFile(l *fileLoads, path string) (*policy.File, error) {
	return loadFile(l, path, func() (*policy.File, error) { return policy.Load(path) })
}

// checkPolicies is -check-policies: it loads the file and says so.
func checkPolicies(path string, stdout io.Writer) error {
	f, err := loadPolicies(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok, %d policies\n", path, len(f.Policies))
	return nil
}

// loadPolicies loads the policies file at path ("": none) at start: a file
// that does not load stops the start (exit 2) with the file's own message.
func loadPolicies(path string) (*policy.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := loadPolicyFile(&fileLoads{}, path)
	if err != nil {
		return nil, cli.Filef("%s", err.Error())
	}
	return f, nil
}

// reloadPolicies reloads the policies on every SIGHUP and, with watch,
// when the file changes, until ctx ends. A file that does not load keeps
// the rules in force (the server logs and counts it).
func reloadPolicies(ctx context.Context, s *api.Server, f policyFlags, watch bool, logger *slog.Logger) {
	onReload(ctx, logger, watch, []string{f.path}, func(why string) {
		if err := s.ReloadPolicies(); err != nil && !errors.Is(err, api.ErrNoPolicies) {
			logger.Warn(why+": policies not reloaded", "err", err)
		}
	})
}

// reloader is api.Config.LoadPolicies for -policies: nil without a file.
// SIGHUP, POST /reload and a change of the file all load through it, and
// a read that hangs is abandoned (loadFile), so none of them waits on
// another for longer than fileTimeout.
func reloader(f policyFlags) func() (*policy.File, error) {
	if f.path == "" {
		return nil
	}
	loads := &fileLoads{}
	return func() (*policy.File, error) { return loadPolicyFile(loads, f.path) }
}
