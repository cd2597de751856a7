package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/readfile"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/rls"
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
	// How the configuration is read and answered, as envoyproxy/ratelimit's
	// settings of the same names (rlsconfig.go).
	merge    bool
	shadow   bool
	quota    bool
	metadata bool
	headers  bool
	// check is -check-rls-config.
	check string
	// TLS of the listener: the serving pair, and for mutual TLS the CA
	// client certificates must chain to and a name one must carry.
	cert, key           string
	clientCA, clientSAN string
}

// rlsTLS is the listener's TLS configuration, nil without -rls-tls-cert.
// The serving pair and the client CA are reread as -tls-cert's pair is
// (reloaded).
func rlsTLS(ctx context.Context, f rlsFlags, watch bool, reloads *prometheus.CounterVec, logger *slog.Logger) (*tls.Config, error) {
	if f.cert == "" {
		return nil, nil
	}
	cert, err := reloaded(ctx, []string{f.cert, f.key}, watch, "rls-tls-cert", "RLS certificate", reloads, logger,
		func() (tls.Certificate, error) { return loadKeyPair(f.cert, f.key) })
	if err != nil {
		return nil, fmt.Errorf("loading -rls-tls-cert %s and -rls-tls-key %s: %w", f.cert, f.key, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}, // gRPC clients require ALPN h2
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil }}
	if f.clientCA == "" {
		return tc, nil
	}
	// The CA bundle is reread as the pair is: each handshake takes the
	// bundle in force, so a rotated CA Secret needs no restart.
	ca, err := reloaded(ctx, []string{f.clientCA}, watch, "rls-tls-client-ca", "RLS client CA", reloads, logger,
		func() (*x509.CertPool, error) { return loadCAPool(f.clientCA) })
	if err != nil {
		return nil, err
	}
	tc.ClientAuth = tls.RequireAndVerifyClientCert
	if san := f.clientSAN; san != "" {
		tc.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) > 0 && len(chains[0]) > 0 && certNames(chains[0][0], san) {
				return nil
			}
			return fmt.Errorf("client certificate does not name %q", san)
		}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: tc.NextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := tc.Clone()
			c.ClientCAs = *ca.Load()
			return c, nil
		}}, nil
}

// loadCAPool reads a PEM CA bundle.
func loadCAPool(path string) (*x509.CertPool, error) {
	pem, err := readfile.Read(path, maxPEMBytes)
	if err != nil {
		return nil, fmt.Errorf("-rls-tls-client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-rls-tls-client-ca %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// certNames reports whether c carries name as a DNS name or a URI among its
// subject alternative names.
func certNames(c *x509.Certificate, name string) bool {
	if slices.Contains(c.DNSNames, name) {
		return true
	}
	for _, u := range c.URIs {
		if u.String() == name {
			return true
		}
	}
	return false
}

// listenRLS listens on -rls-listen: host:port, or unix:/path with the
// -unix-mode permissions, as -listen.
func listenRLS(addr string, lis listenFlags, logger *slog.Logger) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		return listenUnix(path, lis, logger)
	}
	return net.Listen("tcp", addr)
}

// rlsStreamWorkers is the least number of goroutines grpc-go keeps to
// serve RLS calls (GOMAXPROCS when larger).
const rlsStreamWorkers = 256

// rlsService is the loaded rate limit service, not yet serving.
type rlsService struct {
	srv   *rls.Server
	guard *rls.Guard
	grpc  *grpc.Server
	ln    net.Listener
	// config is -rls-config, watched for changes.
	config string
}

// collectors are the service's series for /metrics.
func (r *rlsService) collectors() []prometheus.Collector {
	return append(r.srv.Collectors(), r.guard.Collectors()...)
}

// openRLS loads -rls-config (a bad one stops the start with exit status 2,
// naming the file and the field) and listens on -rls-listen, as c says;
// it returns nil without -rls-listen. Keys are bounded by -max-id-bytes,
// a request's own limit override by the longest scale a check may name
// (apiMaxScale). On -backend memory it warns that replicas count apart.
func openRLS(ctx context.Context, c config, lim rl.Limiter, tlsReloads *prometheus.CounterVec, logger *slog.Logger) (*rlsService, error) {
	f := c.rls
	if f.listen == "" {
		return nil, nil
	}
	loads := &fileLoads{}
	cfg, err := f.load(loads, f.config)
	if err != nil {
		return nil, rlsConfigError(err)
	}
	srv := rls.New(rls.Options{Limiter: lim, Config: cfg, Load: func() (*rls.Config, error) { return f.load(loads, f.config) },
		MaxKeyBytes: c.maxIDBytes, MaxDescriptors: f.maxDescriptors, Logger: logger, Shadow: f.shadow, MaxOverrideScale: apiMaxScale(c),
		QuotaMode: f.quota, ResponseMetadata: f.metadata, ResponseHeaders: f.headers})
	tc, err := rlsTLS(ctx, f, c.watchFiles, tlsReloads, logger)
	if err != nil {
		return nil, err
	}
	ln, err := listenRLS(f.listen, c.lis, logger)
	if err != nil {
		return nil, fmt.Errorf("-rls-listen: %w", err)
	}
	// Stream workers serve calls on a fixed set of goroutines instead of
	// one new goroutine a call (grpc-go shares its write buffers by
	// default): what many connections and calls hold stays bounded,
	// at no cost in throughput (lab/notes/perf-notes.md, "The sidecar's HTTP
	// path"). A call waits on the limiter, so the workers are as many as
	// the calls a loaded server has in hand: when all are busy grpc-go
	// starts a goroutine for the call, whose stack then grows, which cost
	// 13 % of the CPU at 200 callers with one worker a core
	// (BENCHMARKS.md, "Envoy RLS beside envoyproxy/ratelimit"). The guard
	// bounds what one client can make the server hold (docs/security.md).
	// The largest request is fitted to -rls-max-descriptors descriptors
	// whose keys and values take at most -max-id-bytes together; a
	// handshake has as long as an HTTP connection's first byte.
	guard := rls.NewGuard(rls.Limits{MaxConnsPerIP: f.maxConnsPerIP, MaxConns: f.maxConns, MaxStreams: f.maxStreams,
		ArrivingBudget: f.arrivingBudget, MaxRequestBytes: rls.MaxRequestBytes(f.maxDescriptors, c.maxIDBytes),
		ReceiveTimeout: f.receiveTimeout, HandshakeTimeout: c.exp.firstByte, IdleTimeout: f.idleTimeout, Keepalive: f.keepalive})
	opts := append([]grpc.ServerOption{grpc.NumStreamWorkers(uint32(max(rlsStreamWorkers, runtime.GOMAXPROCS(0))))}, guard.ServerOptions()...)
	g := grpc.NewServer(opts...)
	rlspb.RegisterRateLimitServiceServer(g, srv)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("ratelimit", healthpb.HealthCheckResponse_SERVING) // envoyproxy/ratelimit's name for itself
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	logger.Info("rls loaded", "config", f.config, "files", len(cfg.Files), "rules", len(cfg.Rules()),
		"max_request_bytes", guard.Limits().MaxRequestBytes, "tls", f.cert != "", "mtls", f.clientCA != "", "shadow_mode", f.shadow)
	rls.LogSkipped(logger, cfg)
	if c.backend == "memory" {
		// envoyproxy/ratelimit counts on Redis by default: replicas
		// moved over from it would each count alone, without a word.
		logger.Warn("rls: counting in this process's memory (-backend memory): each replica counts on its own, so N replicas allow N times every limit; -backend redis shares the counts")
	}
	if tc != nil {
		// TLS under the guard: it counts connections by their address
		// before any handshake, and reads the HTTP/2 frames in the clear.
		// grpc-go's handshake deadline (the guard's) covers the TLS
		// handshake, which the first read makes.
		ln = tls.NewListener(ln, tc)
	}
	return &rlsService{srv: srv, guard: guard, grpc: g, ln: guard.Listener(ln), config: f.config}, nil
}

// serve serves until ctx ends or the server fails, reloading the
// configuration on SIGHUP and, with watch, when its files change; it stops
// gracefully within grace.
func (r *rlsService) serve(ctx context.Context, grace time.Duration, watch bool, logger *slog.Logger) <-chan error {
	done := make(chan error, 1)
	logger.Info("rls listening", "addr", r.ln.Addr().String())
	go func() { done <- r.grpc.Serve(r.ln) }()
	onReload(ctx, logger, watch, []string{r.config}, func(why string) {
		if err := r.srv.Reload(); err != nil && !errors.Is(err, rls.ErrNoConfig) {
			logger.Warn(why+": rls configuration not reloaded", "err", err)
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
