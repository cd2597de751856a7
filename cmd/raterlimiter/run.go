package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/raterlimiter/raterlimiter/api"
)

// run is the whole program: it parses args (and the environment through
// lookupEnv), serves until ctx ends, then shuts down gracefully, answering
// the requests in flight. It returns nil after a clean shutdown.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	var cfg config
	fs, err := cfg.parse(args, lookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout, fs)
		return nil
	}
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, "raterlimiter", version())
		return nil
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	var srv atomic.Pointer[api.Server] // for sweeps that report before it exists
	be, err := openBackend(cfg, logger, func(n int) {
		if s := srv.Load(); s != nil {
			s.AddSwept(n)
		}
	})
	if err != nil {
		return err
	}
	defer be.Close()

	s := api.New(api.Config{
		Limiter:    be.Limiter,
		Timeout:    cfg.timeout,
		MaxBatch:   cfg.maxBatch,
		MaxIDBytes: cfg.maxIDBytes,
		AdminToken: cfg.adminToken,
		Stats:      be.Stats,
		Collectors: be.Collectors,
		Logger:     logger,
	})
	srv.Store(s)

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().(*net.TCPAddr)
	logger.Info("raterlimiter listening", "addr", addr.String(), "backend", cfg.backend, "version", version())
	if exposedWithoutToken(addr, cfg.adminToken) {
		logger.Warn("listening beyond loopback without -admin-token: anyone who can reach " + addr.String() + " can read and reset buckets")
	}

	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving %s: %w", addr, err)
	case <-ctx.Done():
	}
	logger.Info("raterlimiter shutting down", "grace", cfg.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-served; err != nil {
		return fmt.Errorf("serving %s: %w", addr, err)
	}
	logger.Info("raterlimiter stopped")
	return nil
}

// exposedWithoutToken reports whether the admin endpoints would be open to
// other machines: an address beyond loopback (the unspecified 0.0.0.0 or ::
// included) and no admin token.
func exposedWithoutToken(addr *net.TCPAddr, token string) bool {
	return token == "" && !addr.IP.IsLoopback()
}
