// Package api is the sidecar's HTTP face: a fasthttp server that answers
// check_rate over HTTP (GET and POST /check_rate, POST /check_rates for
// batches), the admin endpoints (/buckets), /healthz and /metrics, for any
// raterlimiter.Limiter: the embedded one or the Redis backend. With a
// policies file (package policy) it also answers /auth for nginx, Caddy
// and Traefik, and checks by policy name (gateway mode); it serves a live
// /dashboard, and the admin endpoints on a listener of their own if asked.
//
// docs/http-api.md lists every endpoint with its exact bodies and headers.
//
// It is the sidecar's own, not a library: its Config takes the sidecar's
// internal types (policies, the gateway's headers, trusted proxies), and
// only the sidecar and the load tool import it (TestAPIIsSealed). A Go
// program embeds the limiter (package memory) or calls the sidecar
// (package client); middleware for its own server is in package middleware.
package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// Defaults of Config's zero fields (each field's comment names its own).
const (
	defaultTimeout      = time.Second
	defaultMaxBatch     = 1000
	defaultReadTimeout  = 10 * time.Second
	defaultWriteTimeout = 10 * time.Second
	defaultIdleTimeout  = 60 * time.Second
	defaultConcurrency  = 16384
	// maxDefaultBodyBytes caps the default MaxBodyBytes: room for a full
	// batch of ordinary ids, but not the 131 MB a batch of 1,000 ids of
	// 64 KiB would claim; such a batch is refused with 413.
	maxDefaultBodyBytes = 16 << 20
	// readBufferSize bounds a request's line and headers (larger ones get
	// 431; an /auth request is denied instead): enough for what nginx
	// passes to /auth, every header its default
	// large_client_header_buffers (4 × 8 KiB) accepts from a client and
	// those it sets itself, so that a client's big headers are read and
	// decided, never an error nginx turns into a 500; and for an id of
	// 1,024 bytes, each percent-encoded. A larger MaxIDBytes raises it.
	readBufferSize = 48 << 10
	// concurrencySlack is how far above Concurrency fasthttp's own bound
	// sits (see New).
	concurrencySlack = 64
)

// healthID is the id /healthz peeks at (hits=0, so it never counts). It
// starts with a NUL byte, which no sane caller uses.
const healthID = "\x00raterlimiter/healthz"

// BackendStats is what the backend tells /metrics about itself.
type BackendStats struct {
	// Live is the number of live bucket records.
	Live int
	// Restarts counts actor restarts after a panic (a counter).
	Restarts uint64
	// Pending is the number of checks waiting in the actors' mailboxes.
	Pending int
	// Evicted counts records evicted to stay within the bound on live
	// buckets (a counter).
	Evicted uint64
}

// Config configures a Server. Limiter is required; every other zero field
// means the default its comment names.
type Config struct {
	// Limiter answers the checks.
	Limiter rl.Limiter
	// Timeout bounds the wait for the limiter's answer; past it the request
	// gets 503. Default 1s. A check waits at most Timeout plus a
	// tenth (deadlines are shared by the requests of a tenth of Timeout, so
	// none pays for a timer of its own).
	Timeout time.Duration
	// MaxBatch is the most checks one POST /check_rates may carry; more get
	// 413. Default 1,000.
	MaxBatch int
	// MaxIDBytes is the longest id accepted, which must not exceed the
	// limiter's own. Default 1,024.
	MaxIDBytes int
	// AdminToken, if set, is the bearer token /buckets requires
	// ("Authorization: Bearer TOKEN"). Empty: /buckets is open.
	AdminToken string
	// Stats, if set, feeds the backend gauges of /metrics.
	Stats func() BackendStats
	// Collectors are more series for /metrics, a backend's own (the Redis
	// backend's call latency and errors, for one).
	Collectors []prometheus.Collector
	// Logger receives errors the client is not told about. Default
	// slog.Default().
	Logger *slog.Logger

	// ReadTimeout, WriteTimeout and IdleTimeout bound slow clients: reading
	// one request, writing one response, and a keep-alive connection's idle
	// time. Defaults 10s, 10s and 60s.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxBodyBytes is the largest request body; larger ones get 413.
	// Default: room for a batch of MaxBatch checks with ids of MaxIDBytes
	// bytes, at least 1 MiB and at most 16 MiB.
	MaxBodyBytes int
	// Concurrency is the most connections served at once; beyond it a new
	// connection gets 503 with Retry-After: 1 and is closed. Default
	// 16,384.
	Concurrency int

	// Policies, if set, are the server-side policies of gateway mode, for
	// /auth and for checks by policy name. The limiter must accept ids of
	// MaxIDBytes + policy.IDOverhead bytes: a policy counts a key under an
	// id that carries the policy's name.
	Policies *policy.File
	// LoadPolicies, if set, reads the policies file again, for
	// ReloadPolicies and POST /reload.
	LoadPolicies func() (*policy.File, error)
	// PoliciesOnly refuses checks that do not name a policy: callers
	// cannot choose their own limits.
	PoliciesOnly bool
	// MaxScale, if positive, is the longest scale a check that names its
	// own may choose; a longer one is a 400 (a check by policy takes the
	// policy's scale, the operator's choice). The sidecar sets it from
	// -redis-max-scale on the Redis backend, where a record lives as long
	// as its scale.
	MaxScale time.Duration
	// AuthDenyStatus is /auth's status for a denied request: 429 (the
	// default), or 401 or 403 for proxies that treat other statuses as
	// errors (nginx auth_request).
	AuthDenyStatus int
	// AuthHeaders is the proxy in front of /auth, and so the one family of
	// headers /auth reads the original request from. Unset, /auth answers
	// 503: a sidecar that guessed could be told any path by any client.
	AuthHeaders policy.Gateway

	// Admin says where the admin endpoints answer. Default AdminOnMain.
	Admin AdminAccess
	// MetricsPublic serves /metrics on the main listener whatever Admin.
	MetricsPublic bool
	// ConnLimits bounds the connections of one client address on the
	// listeners given to Serve.
	ConnLimits ConnLimits
	// BucketsPage is the records one GET /buckets answers without a limit.
	// Default 1,000.
	BucketsPage int
	// Stale, if set, tells /healthz what is stale ("" when nothing is): a
	// snapshot that has not been written for too long. /healthz then still
	// answers 200 (checks are answered), saying so in its body and in the
	// header StaleHeader.
	Stale func() string
	// Dashboard configures GET /dashboard and /dashboard/data (admin).
	Dashboard DashboardConfig
	// MaxWait bounds how long an answer is held for its delay (wait=1, a
	// policy's wait: true); a longer delay is a 429 at once. Default 10s;
	// at most ten years (raterlimiter.MaxDelayMS ms).
	MaxWait time.Duration
	// MaxHeld bounds the answers held at once; MaxHeldPerClient those of
	// one client address (as an ip key reads it: behind a trusted proxy,
	// the address the proxy forwards). A check that asks to wait past
	// either bound is denied at once if it would wait. Both are at most
	// half of ConnLimits' bounds, PerIP and PerProxy: each held answer
	// keeps one of the proxy's connections, which carry every other
	// client too. Defaults 512 and 32.
	MaxHeld, MaxHeldPerClient int
}

// Server serves the HTTP API. It is safe for concurrent use.
type Server struct {
	token    [sha256.Size]byte // of the admin token
	hasToken bool
	rules    *rules
	metrics  *metrics
	srv      *fasthttp.Server
	batches  sync.Pool // of *batch
	readers  sync.Pool // of *jsonReader, for single checks
	scratch  sync.Pool // of *scratch
	// deadlines bounds the wait for the limiter.
	deadlines *deadlines

	// Gateway mode.
	pols        atomic.Pointer[policyState]
	engine      policy.Engine
	pmetrics    *policyMetrics
	authScratch sync.Pool // of *authScratch

	adminSrv *fasthttp.Server
	dash     *dashboard

	mu   sync.Mutex
	shut bool           // Shutdown was called
	lns  []net.Listener // given to Serve

	// stopping is closed when Shutdown begins, releasing held answers
	// (wait.go) and stopping the dashboard's sampler.
	stopping chan struct{}
	// holds counts the answers held at once, over the server and per
	// client address (as an ip key reads it: behind a trusted proxy, the
	// address it forwards), for the bounds MaxHeld and MaxHeldPerClient.
	// Every held answer keeps a connection open, and behind a proxy that is
	// one of the proxy's connections: without a bound, one client that asks
	// to wait on many connections takes them all, and every other client
	// behind the proxy is refused.
	holds addrCount

	// cfg is New's Config, its defaults applied, less the admin token (kept
	// as token) and the first policies file (pols holds the one in force).
	cfg Config
}

// scratch is a reusable buffer for one response.
type scratch struct {
	b []byte
	// policies keeps the rate-limit headers' values that depend on the
	// limit and window only (ratehead.go).
	policies policyCache
}

// New returns a server for cfg. It panics if cfg.Limiter is nil.
func New(cfg Config) *Server {
	if cfg.Limiter == nil {
		panic("api: Config.Limiter is nil")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	if cfg.MaxIDBytes <= 0 {
		cfg.MaxIDBytes = check.DefaultMaxIDBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = defaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = defaultWriteTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		// An item is about 100 bytes of JSON around its id; an id may
		// need escapes, so allow twice its length.
		cfg.MaxBodyBytes = min(max(1<<20, cfg.MaxBatch*(2*cfg.MaxIDBytes+128)+1024), maxDefaultBodyBytes)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = defaultConcurrency
	}
	switch cfg.AuthDenyStatus {
	case 0:
		cfg.AuthDenyStatus = fasthttp.StatusTooManyRequests
	case fasthttp.StatusTooManyRequests, fasthttp.StatusUnauthorized, fasthttp.StatusForbidden:
	default:
		panic("api: Config.AuthDenyStatus must be 401, 403 or 429")
	}
	cfg.BucketsPage = cmp.Or(min(max(cfg.BucketsPage, 0), MaxBucketsPage), defaultBucketsPage)
	cl := &cfg.ConnLimits
	cl.PerIP = cmp.Or(cl.PerIP, defaultMaxConnsPerIP)
	cl.PerProxy = cmp.Or(cl.PerProxy, defaultMaxConnsPerProxy)
	if cl.FirstByteTimeout <= 0 {
		cl.FirstByteTimeout = defaultFirstByteTimeout
	}
	cl.BodyBudget = cmp.Or(cl.BodyBudget, defaultBodyBudget)
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = defaultMaxWait
	}
	cfg.MaxHeld = cmp.Or(max(cfg.MaxHeld, 0), defaultMaxHeld)
	for _, conns := range []int{cl.PerIP, cl.PerProxy} {
		if conns > 0 {
			cfg.MaxHeld = min(cfg.MaxHeld, max(conns/2, 1))
		}
	}
	cfg.MaxHeldPerClient = min(cmp.Or(max(cfg.MaxHeldPerClient, 0), defaultMaxHeldPerClient), cfg.MaxHeld)
	s := &Server{
		cfg:     cfg,
		rules:   newRules(cfg.MaxIDBytes),
		metrics: newMetrics(cfg.Stats, cfg.Collectors),
	}
	s.cfg.AdminToken, s.cfg.Policies = "", nil
	if cfg.AdminToken != "" {
		s.hasToken = true
		s.token = sha256.Sum256([]byte(cfg.AdminToken))
	}
	s.engine = policy.Engine{Limiter: cfg.Limiter, MaxKeyBytes: cfg.MaxIDBytes}
	s.pmetrics = newPolicyMetrics(s.metrics.reg)
	s.setPolicies(cfg.Policies)
	s.authScratch.New = func() any { return new(authScratch) }
	s.batches.New = func() any { return new(batch) }
	s.readers.New = func() any { return new(jsonReader) }
	s.scratch.New = func() any { return &scratch{b: make([]byte, 0, 256)} }
	s.deadlines = newDeadlines(cfg.Timeout)
	s.holds.by = map[netip.Addr]int{}
	s.stopping = make(chan struct{})
	s.engine.MaxWaitMS = min(max(cfg.MaxWait.Milliseconds(), 1), millis.MaxScale)
	s.dash = newDashboard(cfg.Dashboard)
	readBuffer := max(readBufferSize, 3*cfg.MaxIDBytes+4096)
	s.srv = &fasthttp.Server{
		Handler:            s.Handler,
		ErrorHandler:       s.errorHandler,
		Name:               "raterlimiter",
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		MaxRequestBodySize: cfg.MaxBodyBytes,
		ReadBufferSize:     readBuffer,
		// The listener refuses connections past cfg.Concurrency itself,
		// with Retry-After; fasthttp's own bound, a little above it, only
		// catches connections that arrive while closed ones are still
		// being let go, and those on a unix socket.
		Concurrency: cfg.Concurrency + concurrencySlack,
		// Bodies are read by readBody, which sees Content-Length first.
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		HeaderReceived:               headerReceived,
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{cfg.Logger},
	}
	s.adminSrv = &fasthttp.Server{
		Handler:         s.AdminHandler,
		ErrorHandler:    s.errorHandler,
		Name:            "raterlimiter",
		ReadTimeout:     cfg.ReadTimeout,
		WriteTimeout:    max(cfg.WriteTimeout, time.Minute), // a CPU profile takes its seconds
		IdleTimeout:     cfg.IdleTimeout,
		ReadBufferSize:  readBuffer,
		Concurrency:     256,
		CloseOnShutdown: true,
		Logger:          fasthttpLogger{cfg.Logger},
	}
	return s
}

// fasthttpLogger sends fasthttp's own reports (mostly clients that broke a
// connection or sent too much) to slog at debug level: a hostile client must
// not be able to flood the log.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
}

// Serve serves HTTP on ln until Shutdown. It returns nil after Shutdown,
// also when Shutdown came first (it then closes ln at once).
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln) {
		return nil
	}
	s.startDashboard()
	m := s.metrics
	return s.srv.Serve(&limitListener{Listener: ln, lim: s.cfg.ConnLimits, open: addrCount{by: map[netip.Addr]int{}},
		most: s.cfg.Concurrency, pending: &m.heldBytes, refused: m.refusedConns, overBudget: m.overBudget})
}

// track records ln for Shutdown to close; after Shutdown it closes ln
// instead and reports false.
func (s *Server) track(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		ln.Close()
		return false
	}
	s.lns = append(s.lns, ln)
	return true
}

// Shutdown stops accepting connections, answers the requests in flight,
// closes every connection and returns; or returns ctx's error when ctx ends
// first. Serve calls that come after it return at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.shut {
		close(s.stopping) // held answers leave now
	}
	s.shut = true
	lns := s.lns
	s.mu.Unlock()
	err := s.srv.ShutdownWithContext(ctx)
	if aerr := s.adminSrv.ShutdownWithContext(ctx); err == nil {
		err = aerr
	}
	// A Serve that had not yet handed its listener to fasthttp when
	// fasthttp shut down would serve on: closing the listener ends it.
	for _, ln := range lns {
		ln.Close()
	}
	return err
}

// AddSwept counts n swept bucket records in /metrics; wire the backend's
// sweep reports to it.
func (s *Server) AddSwept(n int) { s.metrics.swept.Add(float64(n)) }
