package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
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
	shadow         bool
	// TLS of the listener: the serving pair, and for mutual TLS the CA
	// client certificates must chain to and a name one must carry.
	cert, key           string
	clientCA, clientSAN string
}

// rlsFlagNames lists them in the order -h shows them.
func rlsFlagNames() []string {
	return []string{"rls-listen", "rls-config", "rls-max-descriptors", "rls-shadow-mode",
		"rls-tls-cert", "rls-tls-key", "rls-tls-client-ca", "rls-tls-client-san"}
}

func (f *rlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "rls-listen", "", "address to serve Envoy's rate limit service (gRPC ShouldRateLimit, health, reflection) on; empty: off")
	fs.StringVar(&f.config, "rls-config", "", "envoyproxy/ratelimit configuration: a YAML file or a directory of *.yaml files; reloaded when it changes (-watch-files) and on SIGHUP")
	fs.IntVar(&f.maxDescriptors, "rls-max-descriptors", rls.DefaultMaxDescriptors, "most descriptors one ShouldRateLimit request may carry (more: InvalidArgument)")
	fs.BoolVar(&f.shadow, "rls-shadow-mode", false, "global shadow mode: every descriptor is counted and reported, OVER_LIMIT included, but the overall code is always OK (envoyproxy/ratelimit's SHADOW_MODE)")
	fs.StringVar(&f.cert, "rls-tls-cert", "", "PEM certificate chain to serve the RLS over TLS with (needs -rls-tls-key); reread when it changes (-watch-files) and on SIGHUP")
	fs.StringVar(&f.key, "rls-tls-key", "", "PEM private key of -rls-tls-cert")
	fs.StringVar(&f.clientCA, "rls-tls-client-ca", "", "mutual TLS: PEM CA bundle that RLS clients' certificates must chain to; a client without one is refused (needs -rls-tls-cert)")
	fs.StringVar(&f.clientSAN, "rls-tls-client-san", "", "mutual TLS: a client certificate must also name this DNS name or URI (a SPIFFE id, say) among its subject alternative names (needs -rls-tls-client-ca)")
}

func (f *rlsFlags) validate() error {
	switch {
	case f.listen != "" && f.config == "":
		return cli.Usagef("-rls-listen needs -rls-config")
	case f.config != "" && f.listen == "":
		return cli.Usagef("-rls-config needs -rls-listen")
	case f.maxDescriptors < 1:
		return cli.Usagef("-rls-max-descriptors must be at least 1")
	case (f.cert == "") != (f.key == ""):
		return cli.Usagef("-rls-tls-cert and -rls-tls-key go together")
	case f.clientCA != "" && f.cert == "":
		return cli.Usagef("-rls-tls-client-ca needs -rls-tls-cert: mutual TLS is TLS first")
	case f.clientSAN != "" && f.clientCA == "":
		return cli.Usagef("-rls-tls-client-san needs -rls-tls-client-ca")
	case f.cert != "" && f.listen == "":
		return cli.Usagef("-rls-tls-cert needs -rls-listen")
	}
	return nil
}

// rlsCredentials are the listener's TLS credentials, nil without
// -rls-tls-cert. The serving pair is reread as -tls-cert's is; the client
// CA is read once, at start.
func rlsCredentials(ctx context.Context, f rlsFlags, watch bool, logger *slog.Logger) (credentials.TransportCredentials, error) {
	if f.cert == "" {
		return nil, nil
	}
	certs, err := newCertReloader(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("-rls-tls-cert: %w", err)
	}
	certs.reloadOnChange(ctx, watch, logger)
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}
	if f.clientCA != "" {
		pem, err := os.ReadFile(f.clientCA)
		if err != nil {
			return nil, fmt.Errorf("-rls-tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-rls-tls-client-ca %s: no PEM certificate in it", f.clientCA)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		if san := f.clientSAN; san != "" {
			tc.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
				if len(chains) > 0 && len(chains[0]) > 0 && certNames(chains[0][0], san) {
					return nil
				}
				return fmt.Errorf("client certificate does not name %q", san)
			}
		}
	}
	return credentials.NewTLS(tc), nil
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

// rlsService is the loaded rate limit service, not yet serving.
type rlsService struct {
	srv  *rls.Server
	grpc *grpc.Server
	ln   net.Listener
	// config is -rls-config, watched for changes.
	config string
}

// openRLS loads -rls-config (a bad one stops the start with exit status 2,
// naming the file and the field) and listens on -rls-listen. It returns
// nil without -rls-listen.
func openRLS(ctx context.Context, f rlsFlags, lis listenFlags, watch bool, lim rl.Limiter, maxKey int, logger *slog.Logger) (*rlsService, error) {
	if f.listen == "" {
		return nil, nil
	}
	cfg, err := rls.Load(f.config)
	if err != nil {
		return nil, cli.Filef("%s", err.Error())
	}
	srv := rls.New(rls.Options{Limiter: lim, Config: cfg, Load: func() (*rls.Config, error) { return rls.Load(f.config) },
		MaxKeyBytes: maxKey, MaxDescriptors: f.maxDescriptors, Logger: logger, Shadow: f.shadow})
	creds, err := rlsCredentials(ctx, f, watch, logger)
	if err != nil {
		return nil, err
	}
	ln, err := listenRLS(f.listen, lis, logger)
	if err != nil {
		return nil, fmt.Errorf("-rls-listen: %w", err)
	}
	// Stream workers serve calls on a fixed set of goroutines instead of
	// one new goroutine a call, and a shared write buffer saves a buffer
	// per connection: what many connections and calls hold stays bounded,
	// at no cost in throughput (docs/perf-notes.md, "The sidecar's HTTP
	// path").
	opts := []grpc.ServerOption{grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))), grpc.SharedWriteBuffer(true)}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	g := grpc.NewServer(opts...)
	rlspb.RegisterRateLimitServiceServer(g, srv)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	logger.Info("rls loaded", "config", f.config, "files", len(cfg.Files), "rules", len(cfg.Rules()),
		"tls", f.cert != "", "mtls", f.clientCA != "", "shadow_mode", f.shadow)
	return &rlsService{srv: srv, grpc: g, ln: ln, config: f.config}, nil
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
