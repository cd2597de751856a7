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
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/headers"
)

// Defaults of Config's zero fields.
const (
	DefaultTimeout      = time.Second
	DefaultMaxBatch     = 1000
	DefaultReadTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultIdleTimeout  = 60 * time.Second
	DefaultConcurrency  = 16384
	// DefaultReadBufferSize bounds a request's line and headers: enough for
	// an id of DefaultMaxIDBytes bytes, each percent-encoded.
	DefaultReadBufferSize = 8192
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
	// connection gets 503. Default DefaultConcurrency.
	Concurrency int
}

// Server serves the HTTP API. It is safe for concurrent use.
type Server struct {
	lim      rl.Limiter
	timeout  time.Duration
	maxBatch int
	maxID    int
	token    [sha256.Size]byte // of "Bearer TOKEN"
	hasToken bool
	log      *slog.Logger
	rules    *rules
	metrics  *metrics
	srv      *fasthttp.Server
	batches  sync.Pool // of *batch
	scratch  sync.Pool // of *scratch
	// deadlines bounds the wait for the limiter.
	deadlines *deadlines

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
		cfg.MaxBodyBytes = max(1<<20, cfg.MaxBatch*(2*cfg.MaxIDBytes+128)+1024)
	}
	if cfg.ReadBufferSize <= 0 {
		cfg.ReadBufferSize = max(DefaultReadBufferSize, 3*cfg.MaxIDBytes+4096)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	s := &Server{
		lim:      cfg.Limiter,
		timeout:  cfg.Timeout,
		maxBatch: cfg.MaxBatch,
		maxID:    cfg.MaxIDBytes,
		log:      cfg.Logger,
		rules:    newRules(cfg.MaxIDBytes),
		metrics:  newMetrics(cfg.Stats, cfg.Collectors),
	}
	if cfg.AdminToken != "" {
		s.hasToken = true
		s.token = sha256.Sum256([]byte("Bearer " + cfg.AdminToken))
	}
	s.batches.New = func() any { return new(batch) }
	s.scratch.New = func() any { return &scratch{b: make([]byte, 0, 256)} }
	s.deadlines = newDeadlines(cfg.Timeout)
	s.srv = &fasthttp.Server{
		Handler:            s.Handler,
		ErrorHandler:       s.errorHandler,
		Name:               "raterlimiter",
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		MaxRequestBodySize: cfg.MaxBodyBytes,
		ReadBufferSize:     cfg.ReadBufferSize,
		Concurrency:        cfg.Concurrency,
		CloseOnShutdown:    true,
		Logger:             fasthttpLogger{cfg.Logger},
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
	return s.srv.Serve(ln)
}

// Shutdown stops accepting connections, answers the requests in flight,
// closes every connection and returns; or returns ctx's error when ctx ends
// first. Serve calls that come after it return at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shut = true
	lns := s.lns
	s.mu.Unlock()
	err := s.srv.ShutdownWithContext(ctx)
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
	default:
		s.fail(ctx, fasthttp.StatusNotFound, "api: no such endpoint; see /check_rate, /check_rates, /buckets, /healthz, /metrics")
	}
}

func (s *Server) checkRate(ctx *fasthttp.RequestCtx) {
	start := startTime(ctx)
	var r rl.Request
	var err error
	if ctx.IsGet() {
		err = parseArgs(ctx.QueryArgs(), &r, s.maxID, s.rules)
	} else {
		err = s.parseBody(ctx, &r)
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
			s.metrics.check(r.Algo, s.limiterFailed(ctx, err))
			return
		}
		d = ds[0]
		ctx.Response.Header.Set(DegradedHeader, mode)
	}
	sc := s.scratch.Get().(*scratch)
	sc.b = headers.SetOn(&ctx.Response.Header, sc.b, r, d)
	sc.b = appendDecision(sc.b[:0], r.ID, d)
	ctx.SetContentType("application/json")
	if d.Allowed {
		s.metrics.check(r.Algo, resultAllowed)
	} else {
		s.metrics.check(r.Algo, resultDenied)
		ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	}
	ctx.SetBody(sc.b)
	s.scratch.Put(sc)
	s.metrics.latency(endpointCheck, start)
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
func (s *Server) parseBody(ctx *fasthttp.RequestCtx, r *rl.Request) error {
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
		return &rl.FieldError{Field: "body", Rule: "must be application/json or application/x-www-form-urlencoded"}
	}
	if !isJSON {
		args := fasthttp.AcquireArgs()
		defer fasthttp.ReleaseArgs(args)
		args.ParseBytes(body)
		return parseArgs(args, r, s.maxID, s.rules)
	}
	var idbuf [128]byte
	d := decoder{b: body}
	ids, err := d.check(r, idbuf[:0], s.maxID, s.rules)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return err
	}
	r.ID = string(ids)
	return r.Validate(s.maxID)
}

// batch is the reusable state of one POST /check_rates.
type batch struct {
	reqs []rl.Request
	ends []int // the end of each item's id in ids
	ids  []byte
	out  []byte
	ds   []rl.Decision
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
	b.reqs, b.ends, b.ids = b.reqs[:0], b.ends[:0], b.ids[:0]
	d := decoder{b: ctx.PostBody()}
	if err := s.parseBatch(&d, b); err != nil {
		var te tooLarge
		if errors.As(err, &te) {
			s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, err.Error())
			return
		}
		s.metrics.check(rl.Fixed, resultInvalid)
		s.invalid(ctx, err)
		return
	}
	// One string holds every id; each request's ID is a piece of it.
	all := string(b.ids)
	from := 0
	for i := range b.reqs {
		b.reqs[i].ID = all[from:b.ends[i]]
		from = b.ends[i]
	}
	if err := rl.ValidateBatch(b.reqs, s.maxID); err != nil {
		s.metrics.check(rl.Fixed, resultInvalid)
		s.invalid(ctx, err)
		return
	}
	s.metrics.batchSize.Observe(float64(len(b.reqs)))
	var ds []rl.Decision
	var err error
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
	for i := range ds {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendDecision(out, b.reqs[i].ID, ds[i])
		res := resultAllowed
		if !ds[i].Allowed {
			res = resultDenied
		}
		s.metrics.check(b.reqs[i].Algo, res)
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

func (s *Server) parseBatch(d *decoder, b *batch) error {
	if d.peek() != '[' {
		return d.syntax("expected an array of checks")
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return d.end()
	}
	for {
		if len(b.reqs) == s.maxBatch {
			return tooLarge{s.maxBatch}
		}
		b.reqs = append(b.reqs, rl.Request{})
		var err error
		b.ids, err = d.check(&b.reqs[len(b.reqs)-1], b.ids, s.maxID, s.rules)
		if err != nil {
			return &rl.ItemError{Index: len(b.reqs) - 1, Err: err}
		}
		b.ends = append(b.ends, len(b.ids))
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return d.end()
		default:
			return d.syntax("expected ',' or ']'")
		}
	}
}

func (s *Server) buckets(ctx *fasthttp.RequestCtx) {
	if !s.authorized(ctx) {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="raterlimiter"`)
		s.fail(ctx, fasthttp.StatusUnauthorized, "api: /buckets needs the header Authorization: Bearer <admin token>")
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
		bs, err := s.lim.Buckets(c, id)
		if err != nil {
			s.limiterFailed(ctx, err)
			return
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
	ctx.SetBodyString("ok")
}

// DegradedHeader is set, to the backend's fail mode ("open" or "local"), on
// answers a backend decided without its shared state: the Redis backend
// under -redis-fail open or local, while Redis does not answer.
const DegradedHeader = "X-RateLimit-Degraded"

// degraded is how a backend's error carries decisions it made without its
// shared state (redisbackend.DegradedError has this method): usable
// answers, in order, and the fail mode that made them.
type degraded interface {
	Degraded() (mode string, ds []rl.Decision)
}

// degradedAnswer returns the decisions err carries, if any.
func degradedAnswer(err error) (string, []rl.Decision) {
	var dg degraded
	if errors.As(err, &dg) {
		return dg.Degraded()
	}
	return "", nil
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
