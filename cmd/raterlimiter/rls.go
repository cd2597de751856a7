package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/cli"
	"github.com/raterlimiter/raterlimiter/rls"
)

// rlsFlags are the flags of the Envoy rate limit service.
type rlsFlags struct {
	listen         string
	config         string
	maxDescriptors int
	rlsLoadFlags   // -rls-merge-domains, -check-rls-config (rlsconfig.go)
}

// rlsFlagNames lists them in the order -h shows them.
func rlsFlagNames() []string { return []string{"rls-listen", "rls-config", "rls-max-descriptors"} }

func (f *rlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "rls-listen", "", "address to serve Envoy's rate limit service (gRPC ShouldRateLimit, health, reflection) on; empty: off")
	fs.StringVar(&f.config, "rls-config", "", "envoyproxy/ratelimit configuration: a YAML file or a directory of *.yaml files; reloaded on SIGHUP")
	fs.IntVar(&f.maxDescriptors, "rls-max-descriptors", rls.DefaultMaxDescriptors, "most descriptors one ShouldRateLimit request may carry (more: InvalidArgument)")
	f.rlsLoadFlags.register(fs)
}

func (f *rlsFlags) validate() error {
	switch {
	case f.listen != "" && f.config == "":
		return cli.Usagef("-rls-listen needs -rls-config")
	case f.config != "" && f.listen == "":
		return cli.Usagef("-rls-config needs -rls-listen")
	case f.maxDescriptors < 1:
		return cli.Usagef("-rls-max-descriptors must be at least 1")
	case f.merge && f.config == "" && f.check == "":
		return cli.Usagef("-rls-merge-domains needs -rls-config or -check-rls-config")
	case (f.quota || f.metadata) && f.listen == "":
		return cli.Usagef("-rls-quota-mode and -rls-response-metadata need -rls-listen")
	}
	return nil
}

// rlsService is the loaded rate limit service, not yet serving.
type rlsService struct {
	srv  *rls.Server
	grpc *grpc.Server
	ln   net.Listener
}

// openRLS loads -rls-config (a bad one stops the start with exit status 2,
// naming the file and the field) and listens on -rls-listen. It returns
// nil without -rls-listen.
func openRLS(f rlsFlags, lim rl.Limiter, maxKey int, logger *slog.Logger) (*rlsService, error) {
	if f.listen == "" {
		return nil, nil
	}
	cfg, err := f.load(f.config)
	if err != nil {
		return nil, f.rlsConfigError(err)
	}
	srv := rls.New(rls.Options{Limiter: lim, Config: cfg, Load: func() (*rls.Config, error) { return f.load(f.config) },
		MaxKeyBytes: maxKey, MaxDescriptors: f.maxDescriptors, Logger: logger,
		QuotaMode: f.quota, ResponseMetadata: f.metadata})
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, fmt.Errorf("-rls-listen: %w", err)
	}
	// Stream workers serve calls on a fixed set of goroutines instead of
	// one new goroutine a call, and a shared write buffer saves a buffer
	// per connection: what many connections and calls hold stays bounded,
	// at no cost in throughput (docs/perf-notes.md, "The sidecar's HTTP
	// path").
	g := grpc.NewServer(grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))), grpc.SharedWriteBuffer(true))
	rlspb.RegisterRateLimitServiceServer(g, srv)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	logger.Info("rls loaded", "config", f.config, "files", len(cfg.Files), "rules", len(cfg.Rules()))
	return &rlsService{srv: srv, grpc: g, ln: ln}, nil
}

// serve serves until ctx ends or the server fails, reloading the
// configuration on SIGHUP; it stops gracefully within grace.
func (r *rlsService) serve(ctx context.Context, grace time.Duration, logger *slog.Logger) <-chan error {
	done := make(chan error, 1)
	logger.Info("rls listening", "addr", r.ln.Addr().String())
	go func() { done <- r.grpc.Serve(r.ln) }()
	onHangup(ctx, func() {
		if err := r.srv.Reload(); err != nil && !errors.Is(err, rls.ErrNoConfig) {
			logger.Warn("SIGHUP: rls configuration not reloaded", "err", err)
		}
	})
	go func() {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { r.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(grace):
			r.grpc.Stop()
		}
	}()
	return done
}
