// Package api is the sidecar's HTTP face: a fasthttp server that answers
// check_rate over HTTP (GET and POST /check_rate, POST /check_rates for
// batches), the admin endpoints (/buckets), /healthz and /metrics, for any
// raterlimiter.Limiter: the embedded one or the Redis backend.
//
// The wire format is the contract's (SPEC.md, "HTTP API"); README.md's "HTTP
// API" section lists every endpoint with its exact bodies and headers.
package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/headers"
	"github.com/raterlimiter/raterlimiter/policy"
)

// Defaults of Config's zero fields.
const (
	DefaultTimeout      = time.Second
	DefaultMaxBatch     = 1000
	DefaultReadTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultIdleTimeout  = 60 * time.Second
	DefaultConcurrency  = 16384
	// MaxDefaultBodyBytes caps the default MaxBodyBytes: room for a full
	// batch of ordinary ids, but not the 131 MB a batch of 1,000 ids of
	// 64 KiB would claim; such a batch is refused with 413.
	MaxDefaultBodyBytes = 16 << 20
	// DefaultReadBufferSize bounds a request's line and headers: enough for
	// an id of DefaultMaxIDBytes bytes, each percent-encoded.
	DefaultReadBufferSize = 8192
	// concurrencySlack is how far above Concurrency fasthttp's own bound
	// sits (see New).
	concurrencySlack = 64
)

// HealthID is the id /healthz peeks at (hits=0, so it never counts). It
// starts with a NUL byte, which no sane caller uses.
const HealthID = "\x00raterlimiter/healthz"

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
	// gets 503. Default DefaultTimeout. A check waits at most Timeout plus a
	// tenth (deadlines are shared by the requests of a tenth of Timeout, so
	// none pays for a timer of its own).
	Timeout time.Duration
	// MaxBatch is the most checks one POST /check_rates may carry; more get
	// 413. Default DefaultMaxBatch.
	MaxBatch int
	// MaxIDBytes is the longest id accepted, which must not exceed the
	// limiter's own. Default raterlimiter.DefaultMaxIDBytes.
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
	// time. Defaults DefaultReadTimeout, DefaultWriteTimeout,
	// DefaultIdleTimeout.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxBodyBytes is the largest request body; larger ones get 413.
	// Default: room for a batch of MaxBatch checks with ids of MaxIDBytes
	// bytes, at least 1 MiB.
	MaxBodyBytes int
	// ReadBufferSize bounds the request line and headers together; larger
	// ones get 431. Default: DefaultReadBufferSize, or more when MaxIDBytes
	// needs it.
	ReadBufferSize int
	// Concurrency is the most connections served at once; beyond it a new
	// connection gets 503 with Retry-After: 1 and is closed. Default
	// DefaultConcurrency.
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
	// AuthDenyStatus is /auth's status for a denied request: 429 (the
	// default), or 401 or 403 for proxies that treat other statuses as
	// errors (nginx auth_request).
	AuthDenyStatus int

	// Admin says where the admin endpoints answer. Default AdminOnMain.
	Admin AdminAccess
	// MetricsPublic serves /metrics on the main listener whatever Admin.
	MetricsPublic bool
	// ConnLimits bounds the connections of one client address on the
	// listeners given to Serve.
	ConnLimits ConnLimits
	// BucketsPage is the records one GET /buckets answers without a limit.
	// Default DefaultBucketsPage.
	BucketsPage int
	// Stale, if set, tells /healthz what is stale ("" when nothing is): a
	// snapshot that has not been written for too long. /healthz then still
	// answers 200 (checks are answered), saying so in its body and in the
	// header StaleHeader.
	Stale func() string
	// Dashboard configures GET /dashboard and /dashboard/data (admin).
	Dashboard DashboardConfig
}

// Server serves the HTTP API. It is safe for concurrent use.
type Server struct {
	lim      rl.Limiter
	timeout  time.Duration
	maxBatch int
	maxID    int
	maxBody  int
	token    [sha256.Size]byte // of "Bearer TOKEN"
	hasToken bool
	log      *slog.Logger
	rules    *rules
	metrics  *metrics
	srv      *fasthttp.Server
	batches  sync.Pool // of *batch
	readers  sync.Pool // of *jsonReader, for single checks
	scratch  sync.Pool // of *scratch
	// deadlines bounds the wait for the limiter.
	deadlines *deadlines

	// Gateway mode.
	pols         atomic.Pointer[policyState]
	policiesOnly bool
	denyStatus   int
	loadPolicies func() (*policy.File, error)
	engine       policy.Engine
	pmetrics     *policyMetrics
	authScratch  sync.Pool // of *authScratch

	admin         AdminAccess
	metricsPublic bool
	adminSrv      *fasthttp.Server
	connLimits    ConnLimits
	bucketsPage   int
	stale         func() string
	dash          *dashboard
	stats         func() BackendStats

	mu   sync.Mutex
	shut bool           // Shutdown was called
	lns  []net.Listener // given to Serve
}

// scratch is a reusable buffer for one response.
type scratch struct{ b []byte }

// New returns a server for cfg. It panics if cfg.Limiter is nil.
func New(cfg Config) *Server {
	if cfg.Limiter == nil {
		panic("api: Config.Limiter is nil")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxIDBytes <= 0 {
		cfg.MaxIDBytes = rl.DefaultMaxIDBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		// An item is about 100 bytes of JSON around its id; an id may
		// need escapes, so allow twice its length.
		cfg.MaxBodyBytes = min(max(1<<20, cfg.MaxBatch*(2*cfg.MaxIDBytes+128)+1024), MaxDefaultBodyBytes)
	}
	if cfg.ReadBufferSize <= 0 {
		cfg.ReadBufferSize = max(DefaultReadBufferSize, 3*cfg.MaxIDBytes+4096)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	switch cfg.AuthDenyStatus {
	case 0:
		cfg.AuthDenyStatus = fasthttp.StatusTooManyRequests
	case fasthttp.StatusTooManyRequests, fasthttp.StatusUnauthorized, fasthttp.StatusForbidden:
	default:
		panic("api: Config.AuthDenyStatus must be 401, 403 or 429")
	}
	s := &Server{
		lim:      cfg.Limiter,
		timeout:  cfg.Timeout,
		maxBatch: cfg.MaxBatch,
		maxID:    cfg.MaxIDBytes,
		maxBody:  cfg.MaxBodyBytes,
		log:      cfg.Logger,
		rules:    newRules(cfg.MaxIDBytes),
		metrics:  newMetrics(cfg.Stats, cfg.Collectors),
	}
	if cfg.AdminToken != "" {
		s.hasToken = true
		s.token = sha256.Sum256([]byte("Bearer " + cfg.AdminToken))
	}
	s.policiesOnly, s.denyStatus, s.loadPolicies = cfg.PoliciesOnly, cfg.AuthDenyStatus, cfg.LoadPolicies
	s.admin, s.metricsPublic = cfg.Admin, cfg.MetricsPublic
	s.connLimits = cfg.ConnLimits
	s.stale = cfg.Stale
	s.bucketsPage = cmp.Or(min(max(cfg.BucketsPage, 0), MaxBucketsPage), DefaultBucketsPage)
	if s.connLimits.PerIP == 0 {
		s.connLimits.PerIP = DefaultMaxConnsPerIP
	}
	if s.connLimits.PerProxy == 0 {
		s.connLimits.PerProxy = DefaultMaxConnsPerProxy
	}
	if s.connLimits.FirstByteTimeout <= 0 {
		s.connLimits.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if s.connLimits.BodyBudget == 0 {
		s.connLimits.BodyBudget = DefaultBodyBudget
	}
	s.engine = policy.Engine{Limiter: cfg.Limiter, MaxKeyBytes: cfg.MaxIDBytes}
	s.pmetrics = newPolicyMetrics(s.metrics.reg)
	s.SetPolicies(cfg.Policies)
	s.authScratch.New = func() any { return new(authScratch) }
	s.batches.New = func() any { return new(batch) }
	s.readers.New = func() any { return new(jsonReader) }
	s.scratch.New = func() any { return &scratch{b: make([]byte, 0, 256)} }
	s.deadlines = newDeadlines(cfg.Timeout)
	s.dash, s.stats = newDashboard(cfg.Dashboard), cfg.Stats
	s.srv = &fasthttp.Server{
		Handler:            s.Handler,
		ErrorHandler:       s.errorHandler,
		Name:               "raterlimiter",
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		MaxRequestBodySize: cfg.MaxBodyBytes,
		ReadBufferSize:     cfg.ReadBufferSize,
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
		ReadBufferSize:  cfg.ReadBufferSize,
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
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	return s.srv.Serve(newLimitListener(ln, s.connLimits, s.srv.Concurrency-concurrencySlack, &s.metrics.heldBytes, s.metrics.refusedConns, s.metrics.overBudget))
}

// Shutdown stops accepting connections, answers the requests in flight,
// closes every connection and returns; or returns ctx's error when ctx ends
// first. Serve calls that come after it return at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shut = true
	lns := s.lns
	s.mu.Unlock()
	s.stopDashboard()
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

// Handler serves one request; it is the fasthttp.RequestHandler of the API,
// for callers that run their own fasthttp.Server.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.DisableNormalizing() // send names as the contract spells them
	if ambiguousLength(ctx) {
		// Two framings of one body: a proxy in front may have read it by
		// one and this server by the other, and the bytes after it would
		// be a request nobody sent (RFC 9112 §6.1: reject and close).
		ctx.SetConnectionClose()
		s.fail(ctx, fasthttp.StatusBadRequest, "api: a request with both Content-Length and Transfer-Encoding is refused")
		return
	}
	done, ok := s.readBody(ctx)
	if !ok {
		return
	}
	defer done()
	if s.adminRefusal(ctx) {
		return
	}
	if s.admin == AdminOnMain && s.profiles(ctx) {
		return
	}
	s.route(ctx)
}

// route answers every endpoint but the profiles.
func (s *Server) route(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/check_rate":
		if ctx.IsGet() || ctx.IsPost() {
			s.checkRate(ctx)
			return
		}
		s.methodNotAllowed(ctx, "GET, POST")
	case "/check_rates":
		if ctx.IsPost() {
			s.checkRates(ctx)
			return
		}
		s.methodNotAllowed(ctx, "POST")
	case "/auth":
		s.auth(ctx)
	case "/reload":
		if ctx.IsPost() {
			s.reload(ctx)
			return
		}
		s.methodNotAllowed(ctx, "POST")
	case "/buckets":
		if ctx.IsGet() || ctx.IsDelete() {
			s.buckets(ctx)
			return
		}
		s.methodNotAllowed(ctx, "GET, DELETE")
	case "/healthz":
		if ctx.IsGet() || ctx.IsHead() {
			s.healthz(ctx)
			return
		}
		s.methodNotAllowed(ctx, "GET, HEAD")
	case "/metrics":
		if ctx.IsGet() || ctx.IsHead() {
			s.serveMetrics(ctx)
			return
		}
		s.methodNotAllowed(ctx, "GET, HEAD")
	case "/dashboard", "/dashboard/data":
		if s.dash.cfg.Off {
			s.fail(ctx, fasthttp.StatusNotFound, "api: the dashboard is off")
			return
		}
		if !ctx.IsGet() {
			s.methodNotAllowed(ctx, "GET")
			return
		}
		if len(ctx.Path()) == len("/dashboard") {
			s.serveDashboard(ctx)
		} else {
			s.serveDashboardData(ctx)
		}
	default:
		s.fail(ctx, fasthttp.StatusNotFound, "api: no such endpoint; see /check_rate, /check_rates, /auth, /buckets, /reload, /healthz, /metrics, /dashboard")
	}
}

func (s *Server) checkRate(ctx *fasthttp.RequestCtx) {
	start := startTime(ctx)
	var r rl.Request
	var shown string // the id as the caller gave it
	var err error
	pc := s.policyCheck()
	var pol *policy.Policy
	if ctx.IsGet() {
		pol, err = parseArgs(ctx.QueryArgs(), &r, &shown, s.maxID, s.rules, &pc)
	} else {
		pol, err = s.parseBody(ctx, &r, &shown, &pc)
	}
	if err != nil {
		s.metrics.check(r.Algo, resultInvalid)
		s.invalid(ctx, err)
		return
	}
	d, err := s.lim.CheckRate(s.deadlines.get(start), r)
	var mode string
	if err != nil {
		var ds []rl.Decision
		if mode, ds = degradedAnswer(err); len(ds) != 1 {
			res := s.limiterFailed(ctx, err)
			s.metrics.check(r.Algo, res)
			if pol != nil {
				s.countPolicy(pc.st, &pol.Rule, res)
			}
			return
		}
		d = ds[0]
		ctx.Response.Header.Set(DegradedHeader, mode)
	}
	sc := s.scratch.Get().(*scratch)
	name := headers.PolicyName
	if pol != nil {
		name = pol.Name
	}
	sc.b = headers.SetOnNamed(&ctx.Response.Header, sc.b, name, r, d)
	sc.b = appendDecision(sc.b[:0], shown, d)
	if pol != nil {
		sc.b = appendPolicyFields(sc.b, pol)
	}
	ctx.SetContentType("application/json")
	res := resultAllowed
	if !d.Allowed {
		res = resultDenied
		ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	}
	s.metrics.check(r.Algo, res)
	if pol != nil {
		s.countPolicy(pc.st, &pol.Rule, res)
		s.dash.observe(shown, pol.Name, res == resultDenied)
	} else {
		s.dash.observe(shown, "", res == resultDenied)
	}
	ctx.SetBody(sc.b)
	s.scratch.Put(sc)
	s.metrics.latency(endpointCheck, start)
}

// ambiguousLength reports whether the request came with both a
// Content-Length and a Transfer-Encoding header.
// fasthttp frames the body by Transfer-Encoding and, once it has read it,
// keeps neither header as sent, so the raw header lines are read.
func ambiguousLength(ctx *fasthttp.RequestCtx) bool {
	raw := ctx.Request.Header.RawHeaders()
	var cl, te bool
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		cl = cl || hasHeaderName(line, nameContentLength)
		te = te || hasHeaderName(line, nameTransferEncoding)
	}
	return cl && te
}

var (
	nameContentLength    = []byte("content-length:")
	nameTransferEncoding = []byte("transfer-encoding:")
)

func hasHeaderName(line, name []byte) bool {
	return len(line) >= len(name) && bytes.EqualFold(line[:len(name)], name)
}

// startTime is when the server began the request: fasthttp reads the clock
// once per request already. A handler run outside a fasthttp.Server reads
// it here.
func startTime(ctx *fasthttp.RequestCtx) time.Time {
	if t := ctx.Time(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// parseBody reads a POSTed check: JSON when the content type says so or the
// body starts with '{' and no content type is given; a form otherwise.
func (s *Server) parseBody(ctx *fasthttp.RequestCtx, r *rl.Request, shown *string, pc *policyCheck) (*policy.Policy, error) {
	ct := ctx.Request.Header.ContentType()
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = bytes.TrimSpace(ct)
	body := ctx.PostBody()
	isJSON := false
	switch {
	case len(ct) == 0:
		isJSON = len(bytes.TrimLeft(body, " \t\r\n")) > 0 && bytes.TrimLeft(body, " \t\r\n")[0] == '{'
	case bytes.EqualFold(ct, []byte("application/json")):
		isJSON = true
	case bytes.EqualFold(ct, []byte("application/x-www-form-urlencoded")):
	default:
		return nil, &rl.FieldError{Field: "body", Rule: "must be application/json or application/x-www-form-urlencoded"}
	}
	if !isJSON {
		args := fasthttp.AcquireArgs()
		defer fasthttp.ReleaseArgs(args)
		args.ParseBytes(body)
		return parseArgs(args, r, shown, s.maxID, s.rules, pc)
	}
	var idbuf [128]byte
	jr := s.readers.Get().(*jsonReader)
	defer func() {
		jr.release()
		s.readers.Put(jr)
	}()
	err := jr.reset(body)
	var ids []byte
	var pol *policy.Policy
	if err == nil {
		ids, pol, err = jr.check(r, idbuf[:0], s.maxID, s.rules, pc)
	}
	if err == nil {
		err = jr.end()
	}
	if err != nil {
		return nil, err
	}
	*shown = string(ids)
	if pol != nil {
		r.ID = counterID(pol, ids)
		return pol, r.Validate(s.maxID + policyOverhead)
	}
	r.ID = *shown
	return nil, r.Validate(s.maxID)
}

// batch is the reusable state of one POST /check_rates.
type batch struct {
	reqs []rl.Request
	pols []*policy.Policy // each item's policy, nil for an explicit check
	ends []int            // the end of each item's id in ids
	ids  []byte
	out  []byte
	ds   []rl.Decision
	json jsonReader
	// lent is set when reqs and ds may still be in the limiter's hands
	// (it failed after CheckRatesInto): the batch is not reused.
	lent bool
}

// checkRatesInto is the limiter that decides a batch into the caller's
// buffers (memory.Limiter.CheckRatesInto): rs and out are lent to it until
// it returns nil, and after an error must not be touched again.
type checkRatesInto interface {
	CheckRatesInto(ctx context.Context, rs []rl.Request, out []rl.Decision) error
}

func (s *Server) checkRates(ctx *fasthttp.RequestCtx) {
	start := startTime(ctx)
	b := s.batches.Get().(*batch)
	defer func() {
		if !b.lent && cap(b.ids) <= 1<<20 && cap(b.out) <= 1<<20 {
			clear(b.reqs) // drop the ids' string
			s.batches.Put(b)
		}
	}()
	b.reqs, b.pols, b.ends, b.ids = b.reqs[:0], b.pols[:0], b.ends[:0], b.ids[:0]
	pc := s.policyCheck()
	err := s.parseBatch(ctx.PostBody(), b, &pc)
	b.json.release()
	if err != nil {
		var te tooLarge
		if errors.As(err, &te) {
			s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, err.Error())
			return
		}
		s.metrics.check(rl.Fixed, resultInvalid)
		s.invalid(ctx, err)
		return
	}
	// One string holds every id; each request's ID is a piece of it, or
	// for a check by policy the policy's counter id of it.
	all := string(b.ids)
	from := 0
	anyPolicy := false
	for i := range b.reqs {
		b.reqs[i].ID = all[from:b.ends[i]]
		if p := b.pols[i]; p != nil {
			b.reqs[i].ID = counterID(p, b.ids[from:b.ends[i]])
			anyPolicy = true
		}
		from = b.ends[i]
	}
	maxID := s.maxID
	if anyPolicy {
		maxID += policyOverhead // explicit ids were held to s.maxID as they were read
	}
	if err := rl.ValidateBatch(b.reqs, maxID); err != nil {
		s.metrics.check(rl.Fixed, resultInvalid)
		s.invalid(ctx, err)
		return
	}
	s.metrics.batchSize.Observe(float64(len(b.reqs)))
	var ds []rl.Decision
	if li, ok := s.lim.(checkRatesInto); ok {
		b.ds = slices.Grow(b.ds[:0], len(b.reqs))[:len(b.reqs)]
		if err = li.CheckRatesInto(s.deadlines.get(start), b.reqs, b.ds); err != nil {
			b.lent = true
		}
		ds = b.ds
	} else {
		ds, err = s.lim.CheckRates(s.deadlines.get(start), b.reqs)
	}
	if err != nil {
		mode, dds := degradedAnswer(err)
		if dds == nil {
			res := s.limiterFailed(ctx, err)
			for i := range b.reqs {
				s.metrics.check(b.reqs[i].Algo, res)
			}
			return
		}
		ds = dds
		ctx.Response.Header.Set(DegradedHeader, mode)
	}
	if len(ds) != len(b.reqs) {
		s.log.Error("api: the limiter answered a batch with the wrong number of decisions", "want", len(b.reqs), "got", len(ds))
		s.fail(ctx, fasthttp.StatusInternalServerError, "api: internal error")
		return
	}
	out := append(b.out[:0], '[')
	from = 0
	for i := range ds {
		if i > 0 {
			out = append(out, ',')
		}
		id := all[from:b.ends[i]]
		out = appendDecision(out, id, ds[i])
		from = b.ends[i]
		res := resultAllowed
		if !ds[i].Allowed {
			res = resultDenied
		}
		s.metrics.check(b.reqs[i].Algo, res)
		if p := b.pols[i]; p != nil {
			s.countPolicy(pc.st, &p.Rule, res)
			s.dash.observe(id, p.Name, res == resultDenied)
		} else {
			s.dash.observe(id, "", res == resultDenied)
		}
	}
	out = append(out, ']')
	b.out = out
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
	s.metrics.latency(endpointBatch, start)
}

// tooLarge is the error of a batch with more than MaxBatch items.
type tooLarge struct{ max int }

func (t tooLarge) Error() string {
	return "api: a batch may hold at most " + strconv.Itoa(t.max) + " checks"
}

func (s *Server) parseBatch(body []byte, b *batch, pc *policyCheck) error {
	r := &b.json
	if err := r.reset(body); err != nil {
		return err
	}
	if err := r.open('[', "an array of checks"); err != nil {
		return err
	}
	for r.dec.PeekKind() != ']' {
		if len(b.reqs) == s.maxBatch {
			return tooLarge{s.maxBatch}
		}
		b.reqs = append(b.reqs, rl.Request{})
		var err error
		var p *policy.Policy
		b.ids, p, err = r.check(&b.reqs[len(b.reqs)-1], b.ids, s.maxID, s.rules, pc)
		if err != nil {
			return &rl.ItemError{Index: len(b.reqs) - 1, Err: err}
		}
		b.pols = append(b.pols, p)
		b.ends = append(b.ends, len(b.ids))
	}
	if _, err := r.dec.ReadToken(); err != nil { // ']'
		return r.syntax(err, "")
	}
	return r.end()
}

// Pages of GET /buckets.
const (
	// DefaultBucketsPage is the records one GET /buckets answers without
	// a limit; MaxBucketsPage the most it answers with one.
	DefaultBucketsPage = 1000
	MaxBucketsPage     = 10_000
	// NextCursorHeader carries the cursor of the next page of GET
	// /buckets, when there is one: send it back as ?cursor=.
	NextCursorHeader = "X-Next-Cursor"
)

// pageArgs reads GET /buckets' limit (1 to MaxBucketsPage) and cursor (the
// records already seen).
func pageArgs(args *fasthttp.Args, page int) (limit, cursor int, err error) {
	limit = page
	if v := args.Peek("limit"); v != nil {
		n, ok := parseUint(v)
		if !ok || n < 1 || n > MaxBucketsPage {
			return 0, 0, &rl.FieldError{Field: "limit", Rule: "must be an integer from 1 to " + strconv.Itoa(MaxBucketsPage)}
		}
		limit = int(n)
	}
	if v := args.Peek("cursor"); v != nil {
		n, ok := parseUint(v)
		if !ok || n > 1<<31 {
			return 0, 0, &rl.FieldError{Field: "cursor", Rule: "must be a cursor an earlier page's " + NextCursorHeader + " gave"}
		}
		cursor = int(n)
	}
	return limit, cursor, nil
}

// requireAdmin answers 401 and returns false unless the request carries the
// admin token (when one is set).
func (s *Server) requireAdmin(ctx *fasthttp.RequestCtx, path string) bool {
	if s.authorized(ctx) {
		return true
	}
	ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="raterlimiter"`)
	s.fail(ctx, fasthttp.StatusUnauthorized, "api: "+path+" needs the header Authorization: Bearer <admin token>")
	return false
}

func (s *Server) buckets(ctx *fasthttp.RequestCtx) {
	if !s.requireAdmin(ctx, "/buckets") {
		return
	}
	// id is required; scale only with DELETE (0 or absent: every scale).
	var id string
	var scale int64
	var seen fields
	for k, v := range ctx.QueryArgs().All() {
		f := fieldOf(k)
		if f != fieldID && f != fieldScale {
			continue
		}
		if seen&f != 0 {
			s.invalid(ctx, f.once())
			return
		}
		seen |= f
		switch {
		case f == fieldID:
			id = string(v)
		case ctx.IsGet():
			s.invalid(ctx, &rl.FieldError{Field: "scale", Rule: "is only for DELETE"})
			return
		default:
			n, ok := parseUint(v)
			if !ok || n < 1 || n > rl.MaxScale {
				s.invalid(ctx, s.rules.scale)
				return
			}
			scale = n
		}
	}
	if seen&fieldID == 0 {
		s.invalid(ctx, &rl.FieldError{Field: "id", Rule: "is required"})
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if ctx.IsGet() {
		limit, cursor, err := pageArgs(ctx.QueryArgs(), s.bucketsPage)
		if err != nil {
			s.invalid(ctx, err)
			return
		}
		bs, err := s.lim.Buckets(c, id)
		if err != nil {
			s.limiterFailed(ctx, err)
			return
		}
		bs = bs[min(cursor, len(bs)):]
		if len(bs) > limit {
			bs = bs[:limit]
			ctx.Response.Header.Set(NextCursorHeader, strconv.Itoa(cursor+limit))
		}
		if bs == nil {
			bs = []rl.Bucket{}
		}
		s.writeJSON(ctx, fasthttp.StatusOK, bs)
		return
	}
	n, err := s.lim.Reset(c, id, scale)
	if err != nil {
		s.limiterFailed(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Deleted int `json:"deleted"`
	}{n})
}

// authorized compares the Authorization header with the token in constant
// time (hashing both first, so not even the length leaks).
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if !s.hasToken {
		return true
	}
	got := sha256.Sum256(ctx.Request.Header.Peek("Authorization"))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	c, cancel := context.WithTimeout(context.Background(), min(s.timeout, time.Second))
	defer cancel()
	_, err := s.lim.CheckRate(c, rl.Request{ID: HealthID, Scale: 1000, Limit: 1, Hits: 0})
	if mode, ds := degradedAnswer(err); len(ds) > 0 {
		// Checks are answered, without the shared state: healthy enough to
		// keep serving, and saying so.
		ctx.Response.Header.Set(DegradedHeader, mode)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("degraded: " + mode)
		return
	}
	if err != nil {
		s.limiterFailed(ctx, err)
		return
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	if s.stale != nil {
		if msg := s.stale(); msg != "" {
			ctx.Response.Header.Set(StaleHeader, msg)
			ctx.SetBodyString("ok; " + msg)
			return
		}
	}
	ctx.SetBodyString("ok")
}

// StaleHeader is set on /healthz when something the sidecar keeps is stale
// (a snapshot not written for three intervals).
const StaleHeader = "X-RateLimiter-Stale"

// DegradedHeader is set, to the backend's fail mode ("open" or "local"), on
// answers a backend decided without its shared state: the Redis backend
// under -redis-fail open or local, while Redis does not answer.
const DegradedHeader = "X-RateLimit-Degraded"

// degradedAnswer returns the decisions err carries (rl.Degraded), if any.
func degradedAnswer(err error) (string, []rl.Decision) {
	mode, ds, _ := rl.DegradedDecisions(err)
	return mode, ds
}

// limiterFailed answers a request the limiter refused and returns the
// result to count.
func (s *Server) limiterFailed(ctx *fasthttp.RequestCtx, err error) result {
	switch {
	case errors.Is(err, rl.ErrInvalid):
		s.invalid(ctx, err)
		return resultInvalid
	case errors.Is(err, rl.ErrUnavailable), errors.Is(err, rl.ErrClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// Retry-After: a client that backs off a second gives an overloaded
		// or reconnecting backend room; the check was not counted.
		ctx.Response.Header.Set("Retry-After", "1")
		s.fail(ctx, fasthttp.StatusServiceUnavailable, "api: the limiter cannot answer now: "+err.Error())
		return resultUnavailable
	}
	s.log.Error("api: the limiter failed", "err", err)
	s.fail(ctx, fasthttp.StatusInternalServerError, "api: internal error")
	return resultUnavailable
}

// invalid answers 400 for err, naming the field and the rule (and the index
// of a batch item) in keys of their own.
func (s *Server) invalid(ctx *fasthttp.RequestCtx, err error) {
	b := append([]byte(nil), `{"error":`...)
	b = appendString(b, trimPrefix(err.Error()))
	var ie *rl.ItemError
	if errors.As(err, &ie) {
		b = append(b, `,"index":`...)
		b = strconv.AppendInt(b, int64(ie.Index), 10)
	}
	var fe *rl.FieldError
	if errors.As(err, &fe) {
		b = append(b, `,"field":`...)
		b = appendString(b, fe.Field)
		b = append(b, `,"rule":`...)
		b = appendString(b, fe.Rule)
	}
	b = append(b, '}')
	ctx.SetStatusCode(fasthttp.StatusBadRequest)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func trimPrefix(s string) string {
	const p = "raterlimiter: "
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// fail answers code with the JSON body {"error": msg}.
func (s *Server) fail(ctx *fasthttp.RequestCtx, code int, msg string) {
	b := append([]byte(nil), `{"error":`...)
	b = appendString(b, msg)
	b = append(b, '}')
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (s *Server) methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	ctx.Response.Header.Set("Allow", allow)
	s.fail(ctx, fasthttp.StatusMethodNotAllowed, "api: method not allowed; allowed: "+allow)
}

func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("api: encoding a response", "err", err)
		s.fail(ctx, fasthttp.StatusInternalServerError, "api: internal error")
		return
	}
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// errorHandler answers requests fasthttp could not read, in JSON.
func (s *Server) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &small):
		s.fail(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, "api: request line and headers too large")
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, "api: request body too large")
	case errors.As(err, &timeout) && timeout.Timeout():
		s.fail(ctx, fasthttp.StatusRequestTimeout, "api: request not read in time")
	default:
		s.fail(ctx, fasthttp.StatusBadRequest, "api: malformed HTTP request")
	}
}
