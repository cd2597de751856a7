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
	"github.com/prometheus/client_golang/prometheus"
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
	// The listener's bounds (rls.Limits).
	maxConnsPerIP  int
	maxConns       int
	maxStreams     int
	arrivingBudget int64
	receiveTimeout time.Duration
	idleTimeout    time.Duration
	keepalive      time.Duration
}

// rlsFlagNames lists them in the order -h shows them.
func rlsFlagNames() []string {
	return []string{"rls-listen", "rls-config", "rls-max-descriptors", "rls-max-conns-per-ip", "rls-max-conns", "rls-max-streams",
		"rls-arriving-budget", "rls-receive-timeout", "rls-idle-timeout", "rls-keepalive"}
}

func (f *rlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "rls-listen", "", "address to serve Envoy's rate limit service (gRPC ShouldRateLimit, health, reflection) on; empty: off")
	fs.StringVar(&f.config, "rls-config", "", "envoyproxy/ratelimit configuration: a YAML file or a directory of *.yaml files; reloaded on SIGHUP")
	fs.IntVar(&f.maxDescriptors, "rls-max-descriptors", rls.DefaultMaxDescriptors, "most descriptors one ShouldRateLimit request may carry (more: InvalidArgument); with -max-id-bytes it sets the largest request read (a longer one: ResourceExhausted, unread)")
	fs.IntVar(&f.maxConnsPerIP, "rls-max-conns-per-ip", rls.DefaultMaxConnsPerIP, "most RLS connections one client address may hold at once; more are closed at accept; -1: no bound")
	fs.IntVar(&f.maxConns, "rls-max-conns", rls.DefaultMaxConns, "most RLS connections open at once over every address; more are closed at accept; -1: no bound")
	fs.IntVar(&f.maxStreams, "rls-max-streams", rls.DefaultMaxStreams, "most calls one RLS connection may have open at once (HTTP/2 max concurrent streams), answered or not")
	fs.Int64Var(&f.arrivingBudget, "rls-arriving-budget", rls.DefaultArrivingBudget, "bytes of RLS requests begun and not yet whole, over all connections; past it a connection holding more than the largest request of them is closed; -1: no bound")
	fs.DurationVar(&f.receiveTimeout, "rls-receive-timeout", rls.DefaultReceiveTimeout, "longest time an RLS request may take to arrive after its headers; a slower one is ended and its bytes dropped")
	fs.DurationVar(&f.idleTimeout, "rls-idle-timeout", rls.DefaultIdleTimeout, "close an RLS connection with no call open for this long")
	fs.DurationVar(&f.keepalive, "rls-keepalive", rls.DefaultKeepalive, "ping an RLS connection that sent nothing for this long, and close it if the ping is not answered within 10s")
}

func (f *rlsFlags) validate() error {
	switch {
	case f.listen != "" && f.config == "":
		return cli.Usagef("-rls-listen needs -rls-config")
	case f.config != "" && f.listen == "":
		return cli.Usagef("-rls-config needs -rls-listen")
	case f.maxDescriptors < 1:
		return cli.Usagef("-rls-max-descriptors must be at least 1")
	case f.maxConnsPerIP == 0 || f.maxConnsPerIP < -1:
		return cli.Usagef("-rls-max-conns-per-ip must be positive, or -1 for no bound")
	case f.maxConns == 0 || f.maxConns < -1:
		return cli.Usagef("-rls-max-conns must be positive, or -1 for no bound")
	case f.maxStreams < 1:
		return cli.Usagef("-rls-max-streams must be at least 1")
	case f.arrivingBudget == 0 || f.arrivingBudget < -1:
		return cli.Usagef("-rls-arriving-budget must be positive, or -1 for no bound")
	case f.receiveTimeout <= 0:
		return cli.Usagef("-rls-receive-timeout must be positive")
	case f.idleTimeout <= 0:
		return cli.Usagef("-rls-idle-timeout must be positive")
	case f.keepalive <= 0:
		return cli.Usagef("-rls-keepalive must be positive")
	}
	return nil
}

// limits are the listener's bounds: the largest request is fitted to
// -rls-max-descriptors descriptors of 16 entries whose keys and values
// take at most maxKey bytes (-max-id-bytes) together.
func (f rlsFlags) limits(maxKey int, handshake time.Duration) rls.Limits {
	return rls.Limits{MaxConnsPerIP: f.maxConnsPerIP, MaxConns: f.maxConns, MaxStreams: f.maxStreams,
		ArrivingBudget: f.arrivingBudget, MaxRequestBytes: rls.MaxRequestBytes(f.maxDescriptors, maxKey),
		ReceiveTimeout: f.receiveTimeout, HandshakeTimeout: handshake, IdleTimeout: f.idleTimeout, Keepalive: f.keepalive}
}

// rlsService is the loaded rate limit service, not yet serving.
type rlsService struct {
	srv   *rls.Server
	guard *rls.Guard
	grpc  *grpc.Server
	ln    net.Listener
}

// collectors are the service's series for /metrics.
func (r *rlsService) collectors() []prometheus.Collector {
	return append(r.srv.Collectors(), r.guard.Collectors()...)
}

// openRLS loads -rls-config (a bad one stops the start with exit status 2,
// naming the file and the field) and listens on -rls-listen. It returns
// nil without -rls-listen.
func openRLS(f rlsFlags, lim rl.Limiter, maxKey int, handshake time.Duration, logger *slog.Logger) (*rlsService, error) {
	if f.listen == "" {
		return nil, nil
	}
	cfg, err := rls.Load(f.config)
	if err != nil {
		return nil, cli.Filef("%s", err.Error())
	}
	srv := rls.New(rls.Options{Limiter: lim, Config: cfg, Load: func() (*rls.Config, error) { return rls.Load(f.config) },
		MaxKeyBytes: maxKey, MaxDescriptors: f.maxDescriptors, Logger: logger})
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, fmt.Errorf("-rls-listen: %w", err)
	}
	// Stream workers serve calls on a fixed set of goroutines instead of
	// one new goroutine a call, and a shared write buffer saves a buffer
	// per connection: what many connections and calls hold stays bounded,
	// at no cost in throughput (docs/perf-notes.md, "The sidecar's HTTP
	// path"). The guard bounds what one client can make the server hold
	// (docs/security.md).
	guard := rls.NewGuard(f.limits(maxKey, handshake))
	opts := append([]grpc.ServerOption{grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))), grpc.SharedWriteBuffer(true)}, guard.ServerOptions()...)
	g := grpc.NewServer(opts...)
	rlspb.RegisterRateLimitServiceServer(g, srv)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	logger.Info("rls loaded", "config", f.config, "files", len(cfg.Files), "rules", len(cfg.Rules()),
		"max_request_bytes", guard.Limits().MaxRequestBytes)
	return &rlsService{srv: srv, guard: guard, grpc: g, ln: guard.Listener(ln)}, nil
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
