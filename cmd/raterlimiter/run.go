package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

// runLogged is the whole program: it parses args (and the environment
// through lookupEnv), serves until ctx ends, then shuts down gracefully,
// answering the requests in flight. It returns nil after a clean shutdown.
// install, when not nil, is given the sidecar's logger before anything
// logs: main installs it as the process's default.
// With -log-format json, an error that ends the run is logged as JSON too
// and returned marked as such (cli.Logged), so that every line on stderr
// is JSON.
func runLogged(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, install func(*slog.Logger)) (err error) {
	var cfg config
	err = cfg.parse(args, lookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return nil
	}
	logger := newLogger(cfg.logFormat, stderr)
	if cfg.logFormat == "json" {
		defer func() {
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				logger.Error("raterlimiter exited with an error", "err", err.Error(), "exit_status", cli.Status(err))
				err = cli.Logged(err)
			}
		}()
	}
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, "raterlimiter", version())
		return nil
	}
	if cfg.healthcheck != "" {
		return healthcheck(ctx, cfg.healthcheck, cfg.healthcheckTimeout, stdout)
	}
	if cfg.pol.check != "" {
		return checkPolicies(cfg.pol.check, stdout)
	}
	if cfg.rls.check != "" {
		return cfg.rls.checkRLSConfig(stdout)
	}
	if install != nil {
		install(logger)
	}
	loadPolicyFile := policyLoader(cfg.pol.path)
	policies, err := loadPolicies(loadPolicyFile)
	if err != nil {
		return err
	}
	for _, w := range envWarnings(lookupEnv, os.Environ()) {
		logger.Warn(w)
	}
	for _, n := range cfg.peerNotes {
		logger.Log(ctx, n.level, n.msg)
	}

	var srv atomic.Pointer[api.Server] // for sweeps that report before it exists
	be, err := openBackend(cfg, logger, func(n int, took time.Duration) {
		if s := srv.Load(); s != nil {
			s.AddSwept(n)
			s.ObserveSweep(took)
		}
	})
	if err != nil {
		return err
	}
	closeBackend := sync.OnceValue(be.Close)
	defer closeBackend()

	tlsReloads := newTLSReloads()
	rlsSvc, err := openRLS(ctx, cfg, be.Limiter, tlsReloads, logger)
	if err != nil {
		return err
	}
	collectors := append(be.Collectors, tlsReloads)
	if rlsSvc != nil {
		defer rlsSvc.ln.Close()
		collectors = append(collectors, rlsSvc.collectors()...)
	}

	token, err := adminToken(cfg.adminToken, cfg.exp)
	if err != nil {
		return err
	}
	ln, err := openListener(ctx, cfg.listen, cfg.lis, cfg.watchFiles, tlsReloads, logger)
	if err != nil {
		return err
	}
	defer ln.Close()
	adminLn, err := listenAdmin(cfg.exp, token)
	if err != nil {
		return err
	}
	if adminLn != nil {
		defer adminLn.Close()
	}
	access := adminAccess(ln.Addr(), token, cfg.exp)

	s := api.New(api.Config{
		Limiter:    be.Limiter,
		Timeout:    cfg.timeout,
		MaxBatch:   cfg.maxBatch,
		MaxIDBytes: cfg.maxIDBytes,
		AdminToken: token,
		Stats:      be.Stats,
		Stale:      be.Stale,
		Collectors: collectors,
		Logger:     logger,

		Policies:       policies,
		LoadPolicies:   loadPolicyFile,
		PoliciesOnly:   cfg.pol.only,
		MaxScale:       apiMaxScale(cfg),
		AuthDenyStatus: cfg.pol.denyStatus,
		AuthHeaders:    cfg.pol.gateway(),

		Admin:         access,
		MetricsPublic: cfg.exp.metricsPublic,
		ConnLimits: api.ConnLimits{PerIP: cfg.exp.perIP, PerProxy: cfg.exp.perProxy, Proxies: cfg.proxies,
			FirstByteTimeout: cfg.exp.firstByte, BodyBudget: cfg.exp.bodyBudget},
		Dashboard: api.DashboardConfig{Off: cfg.dashboardOff, HashIDs: cfg.dashboardHashIDs, Backend: cfg.backend, State: be.State},
		MaxWait:   cfg.maxWait,
		MaxHeld:   cfg.maxHeld, MaxHeldPerClient: cfg.maxHeldPerClient,
	})
	srv.Store(s)
	if policies != nil {
		watchPolicies(ctx, s, cfg.pol, len(policies.Policies), cfg.watchFiles, logger)
	}

	addr := ln.Addr()
	logger.Info("raterlimiter listening", "addr", addr.String(), "backend", cfg.backend, "tls", cfg.lis.cert != "", "version", version())
	switch access {
	case api.AdminRefused:
		logger.Warn("listening beyond loopback without an admin token: the admin endpoints (/buckets, /reload, /metrics) answer 403 on " +
			addr.String() + "; set -admin-token-file, or -admin-listen 127.0.0.1:PORT")
	case api.AdminSeparate:
		logger.Info("admin endpoints listening", "addr", adminLn.Addr().String())
	}

	served := make(chan error, 2)
	go func() { served <- s.Serve(ln) }()
	if adminLn != nil {
		go func() { served <- s.ServeAdmin(adminLn) }()
	}
	var rlsDone <-chan error
	rctx, stopRLS := context.WithCancel(ctx)
	defer stopRLS()
	if rlsSvc != nil {
		rlsDone = rlsSvc.serve(rctx, cfg.shutdownTimeout, cfg.watchFiles, logger)
	}
	select {
	case err := <-served:
		return fmt.Errorf("serving %s: %w", addr, err)
	case err := <-rlsDone:
		return fmt.Errorf("serving the rls on %s: %w", cfg.rls.listen, err)
	case <-ctx.Done():
	}
	stopRLS()
	logger.Info("raterlimiter shutting down", "grace", cfg.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-served; err != nil {
		return fmt.Errorf("serving %s: %w", addr, err)
	}
	if adminLn != nil {
		if err := <-served; err != nil {
			return fmt.Errorf("serving %s: %w", adminLn.Addr(), err)
		}
	}
	if rlsDone != nil {
		if err := <-rlsDone; err != nil {
			return fmt.Errorf("serving the rls on %s: %w", cfg.rls.listen, err)
		}
	}
	// The final snapshot is written as the backend closes: a failure is
	// the run's failure (exit status 1), and "stopped" is logged only
	// after it.
	if err := closeBackend(); err != nil {
		logger.Error("raterlimiter stopped with an error", "err", err)
		return fmt.Errorf("closing the backend: %w", err)
	}
	logger.Info("raterlimiter stopped")
	return nil
}
