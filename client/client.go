// Package client is the Go client of the raterlimiter sidecar. A *Client
// implements raterlimiter.Limiter over the sidecar's HTTP API, so an
// application switches between the embedded limiter (package memory) and a
// sidecar by changing the line that builds its Limiter.
//
// Requests travel over a fasthttp.HostClient: keep-alive connections to the
// one sidecar, pooled request and response buffers, which cost a check less
// time and far fewer allocations than net/http (BenchmarkTransport compares
// them; docs/client.md says why and what it costs). Every call honours its
// context (a cancelled call returns at once) and is bounded by
// Config.Timeout. Requests are validated locally
// before they are sent, so an invalid one costs no round trip.
//
// Errors: an invalid request fails with an error matching
// raterlimiter.ErrInvalid that errors.As finds as a *raterlimiter.FieldError
// (and, for CheckRates, a *raterlimiter.ItemError naming the index); a
// transport error, a deadline and a 5xx answer match raterlimiter.ErrUnavailable.
// Every error that came from the sidecar or the transport is a *Error.
package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	json "github.com/go-json-experiment/json/v1"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Defaults of Config's zero fields.
const (
	// defaultTimeout bounds every call that has no earlier deadline.
	defaultTimeout = time.Second
	// defaultMaxConns is how many connections the client keeps open to
	// the sidecar (idle ones included).
	defaultMaxConns = 256
	// maxBody bounds what the client reads of one answer.
	maxBody = 64 << 20
)

// Config configures a Client. Only URL is required; every other zero field
// means the default its comment names.
type Config struct {
	// URL is the sidecar's base URL, for example "http://127.0.0.1:8080",
	// "https://sidecar:8443" (see TLSConfig), or "unix:/run/raterlimiter.sock"
	// for a sidecar listening on a unix socket (-listen unix:/path).
	URL string
	// Timeout bounds each call (the caller's context may end it sooner).
	// Default 1s; negative means no bound but the context's.
	Timeout time.Duration
	// FailMode says what checks answer when the sidecar cannot. The
	// client has no limiter of its own, so it takes rl.FailClosed and
	// rl.FailOpen; New refuses rl.FailLocal. FailClosed, the default,
	// returns the error (it matches raterlimiter.ErrUnavailable). FailOpen
	// answers as if the id had no recorded hits and allows the request:
	// Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit, Now: the
	// client's clock}, Count, Reset and RetryAfter 0, and a nil error, as
	// the Redis backend's FailOpen; OnDegraded reports it. It applies to
	// the sidecar's failures only (transport errors, 5xx answers and
	// deadlines), never to an invalid request, a 4xx answer or a cancelled
	// context.
	FailMode rl.FailMode
	// OnDegraded, if set, is called for every call answered by FailOpen
	// because the sidecar did not, with the mode, the number of checks so
	// answered and the error; the same callback as
	// redisbackend.Config.OnDegraded. It must be safe for concurrent use.
	OnDegraded func(rl.DegradedEvent)
	// AdminToken, if set, is sent as "Authorization: Bearer TOKEN" to the
	// admin endpoints (Buckets and Reset); checks never send it.
	AdminToken string
	// Clock returns the time; it fills Decision.Now. Default: time.Now.
	Clock func() time.Time
	// MaxIDBytes is the longest id the local validation accepts; keep it equal
	// to the sidecar's -max-id-bytes. Default 1024.
	MaxIDBytes int
	// TLSConfig is used for an https URL. Default: crypto/tls's defaults.
	TLSConfig *tls.Config
	// MaxConns caps the connections to the sidecar, each kept alive when
	// idle; a call that finds them all busy waits for one until its
	// deadline. Default 256.
	MaxConns int

	// BatchMaxSize, if positive, turns batching on, as a positive
	// BatchWindow does: concurrent CheckRate calls travel together, up to
	// BatchMaxSize of them, in one POST /check_rates. A batch leaves as
	// soon as the previous one is back, taking every check that is waiting
	// by then (plus those arriving within BatchWindow, if set): under light
	// load a check leaves at once, under heavy load the checks that arrive
	// while a batch travels make the next one. Each caller gets its own
	// decision and its own error; a caller whose context ends is left out
	// of its batch and never fails the others. Ids that are not valid
	// UTF-8 cannot travel in JSON and go alone. It must not exceed the
	// sidecar's -max-batch (1,000 by default). With BatchMaxSize 0 and a
	// positive BatchWindow, batches hold up to 500. Default 0: no
	// batching, each check its own GET /check_rate.
	BatchMaxSize int
	// BatchWindow, if positive, turns batching on (see BatchMaxSize) and is
	// how long a batch that may leave still waits for more checks. Default
	// 0: the window is the time the previous batch spends on its way,
	// which is what to choose: timers under a millisecond tend to fire a
	// millisecond late, which a fixed window pays on every check.
	BatchWindow time.Duration
}

// Client calls a raterlimiter sidecar. It is safe for concurrent use. Close
// stops it. A Client must be made with New: the zero value's methods fail
// with an error that says so.
type Client struct {
	hc     *fasthttp.HostClient
	batch  *batcher // nil unless Config.BatchMaxSize or BatchWindow is positive
	closed atomic.Bool
	once   sync.Once
	base   string // URL without a trailing slash
	// ratesURI is base's POST /check_rates, made once for every batch.
	ratesURI string
	cfg      Config // with the defaults of its zero fields
}

var _ rl.Limiter = (*Client)(nil)

// New returns a client of the sidecar at cfg.URL. It fails only on a URL that
// is not an absolute http or https URL or a unix: socket path.
func New(cfg Config) (*Client, error) {
	if cfg.FailMode > rl.FailOpen {
		return nil, fmt.Errorf("client: FailMode %v: the client has no limiter of its own to fall back on; use rl.FailClosed or rl.FailOpen", cfg.FailMode)
	}
	var sock string // unix socket path, for a unix: URL
	if path, ok := strings.CutPrefix(cfg.URL, "unix:"); ok {
		if path == "" {
			return nil, fmt.Errorf("client: bad URL %q: want unix:/path/to/socket", cfg.URL)
		}
		sock, cfg.URL = path, "http://localhost"
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("client: bad URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: bad URL %q: want http(s)://host[:port][/path]", cfg.URL)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, defaultTimeout)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	c := &Client{base: strings.TrimRight(u.String(), "/"), cfg: cfg}
	c.ratesURI = c.base + "/check_rates"
	conns := cfg.MaxConns
	if conns <= 0 {
		conns = defaultMaxConns
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	wait := cfg.Timeout
	if wait < 0 {
		wait = time.Hour // no bound but the context's; HostClient needs one
	}
	c.hc = &fasthttp.HostClient{
		Addr:                addr,
		Name:                "raterlimiter-client",
		IsTLS:               u.Scheme == "https",
		TLSConfig:           cfg.TLSConfig,
		MaxConns:            conns,
		MaxConnWaitTimeout:  wait,
		MaxIdleConnDuration: 60 * time.Second,
		MaxResponseBodySize: maxBody,
		// A check counts, so it is not idempotent: retry only a request
		// that met a connection the sidecar had closed while idle.
		RetryIfErr: func(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
			return false, attempts < 2 && (errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed))
		},
	}
	if sock != "" {
		var d net.Dialer
		c.hc.Dial = func(string) (net.Conn, error) { return d.Dial("unix", sock) }
	}
	if cfg.BatchMaxSize > 0 || cfg.BatchWindow > 0 {
		c.batch = newBatcher(c, cfg.BatchWindow, cfg.BatchMaxSize)
	}
	return c, nil
}

// Close stops the batcher, if any, and closes the client's idle
// connections. Later calls fail with raterlimiter.ErrClosed. Close is
// idempotent.
func (c *Client) Close() error {
	if c.hc == nil {
		return nil // not made by New: nothing to close
	}
	c.once.Do(func() {
		c.closed.Store(true)
		if c.batch != nil {
			c.batch.close()
		}
		c.hc.CloseIdleConnections()
	})
	return nil
}

// errNotNew is the error of a Client's methods when it was not made by New.
var errNotNew = errors.New("client: a Client must be made with client.New")

// CheckRate asks the sidecar to decide r (GET /check_rate).
func (c *Client) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	if c.hc == nil {
		return rl.Decision{}, errNotNew
	}
	if err := check.Validate(r, c.cfg.MaxIDBytes); err != nil {
		return rl.Decision{}, err
	}
	r = check.Counted(r)
	var d rl.Decision
	var err error
	if c.batch != nil && utf8.ValidString(r.ID) { // a batch is JSON, which carries text
		d, err = c.batch.check(ctx, r)
	} else {
		d, err = c.checkRate(ctx, r)
	}
	if err != nil {
		if c.failOpen(ctx, err, 1) {
			return c.openDecision(r), nil
		}
		return rl.Decision{}, err
	}
	return d, nil
}

// Wait waits for capacity: it returns once r is allowed (after its delay,
// with algo Leaky), checking again after each denial's RetryAfter, or with
// an error once ctx ends. It is raterlimiter.Wait(ctx, c, r); see there. A
// check carries the bound of ctx's deadline (max_delay_ms), so the sidecar
// refuses a longer delay before it takes a place in the queue. The sleeps
// are the client's: they hold no connection to the sidecar, and -max-wait
// does not bound them.
func (c *Client) Wait(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Wait(ctx, c, r)
}

func (c *Client) checkRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	u := make([]byte, 0, len(c.base)+len("/check_rate?id=&scale=&limit=&hits=&algo=sliding")+3*len(r.ID)+40)
	u = append(u, c.base...)
	u = append(u, "/check_rate?id="...)
	u = append(u, url.QueryEscape(r.ID)...)
	u = append(u, "&scale="...)
	u = strconv.AppendInt(u, r.Scale.Milliseconds(), 10)
	u = append(u, "&limit="...)
	u = strconv.AppendInt(u, r.Limit, 10)
	u = append(u, "&hits="...)
	u = strconv.AppendInt(u, r.Hits, 10)
	if r.Algo != rl.Fixed {
		u = append(u, "&algo="...)
		u = append(u, r.Algo.String()...)
	}
	if r.Slices != 0 {
		u = append(u, "&slices="...)
		u = strconv.AppendInt(u, r.Slices, 10)
	}
	if r.Queue != 0 {
		u = append(u, "&queue="...)
		u = strconv.AppendInt(u, r.Queue, 10)
	}
	if r.MaxDelay != 0 {
		u = append(u, "&max_delay_ms="...)
		u = strconv.AppendInt(u, r.MaxDelay.Milliseconds(), 10)
	}
	var d rl.Decision
	err := c.do(ctx, fasthttp.MethodGet, string(u), nil, false, func(status int, body []byte, _ *fasthttp.ResponseHeader) error {
		return decodeDecision(status, body, &d)
	})
	d.Now = c.cfg.Clock()
	return d, err
}

// CheckRates asks the sidecar to decide rs in order (POST /check_rates). If a
// request is invalid nothing is sent and the error is a
// *raterlimiter.ItemError naming the first bad index. The batch travels as
// JSON, whose strings are text: an id that is not valid UTF-8 is refused
// with an ItemError on field "id" (CheckRate carries such ids).
func (c *Client) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	if c.hc == nil {
		return nil, errNotNew
	}
	if err := check.Batch(rs, c.cfg.MaxIDBytes); err != nil {
		return nil, err
	}
	for i := range rs {
		if !utf8.ValidString(rs[i].ID) {
			return nil, &rl.ItemError{Index: i, Err: &rl.FieldError{Field: "id", Rule: "must be valid UTF-8 in a batch (JSON carries text)"}}
		}
	}
	if len(rs) == 0 {
		return []rl.Decision{}, nil
	}
	_, ds, err := c.post(ctx, rs, make([]byte, 0, 80*len(rs)), make([]rl.Decision, 0, len(rs)))
	if err != nil {
		if c.failOpen(ctx, err, len(rs)) {
			ds = make([]rl.Decision, len(rs))
			for i := range rs {
				ds[i] = c.openDecision(rs[i])
			}
			return ds, nil
		}
		return nil, err
	}
	now := c.cfg.Clock()
	for i := range ds {
		ds[i].Now = now
	}
	return ds, nil
}

// post sends the valid, non-empty batch rs (POST /check_rates), its JSON
// written over body, and decodes the decisions over ds; it returns both
// buffers, for the batcher to reuse.
func (c *Client) post(ctx context.Context, rs []rl.Request, body []byte, ds []rl.Decision) ([]byte, []rl.Decision, error) {
	body = appendBatchJSON(body[:0], rs)
	err := c.do(ctx, fasthttp.MethodPost, c.ratesURI, body, false, func(status int, b []byte, _ *fasthttp.ResponseHeader) error {
		got, err := decodeDecisions(status, b, ds, len(rs))
		if err == nil {
			ds = got
		}
		return err
	})
	return body, ds, err
}

// decodeDecisions decodes the body of a 200 from /check_rates, which must
// hold n decisions, into ds[:0].
func decodeDecisions(status int, body []byte, ds []rl.Decision, n int) ([]rl.Decision, error) {
	if status != fasthttp.StatusOK {
		return nil, errUnexpected
	}
	ds, err := decodeBatchAnswer(body, ds)
	if err != nil {
		return nil, err
	}
	if len(ds) != n {
		return nil, fmt.Errorf("client: %d decisions for %d requests", len(ds), n)
	}
	return ds, nil
}

// maxBucketsPages bounds the pages Buckets follows: a server that hands out
// cursors without end cannot keep the client looping. One id holds at most
// -max-scales-per-id scales' records, far fewer than a page.
const maxBucketsPages = 1000

// Buckets lists the live records of id (GET /buckets), sending the admin
// token if configured.
func (c *Client) Buckets(ctx context.Context, id string) ([]rl.Bucket, error) {
	if c.hc == nil {
		return nil, errNotNew
	}
	if err := check.Validate(rl.Request{ID: id, Scale: time.Millisecond}, c.cfg.MaxIDBytes); err != nil {
		return nil, err
	}
	all := []rl.Bucket{}
	cursor := ""
	for range maxBucketsPages {
		uri := c.base + "/buckets?id=" + url.QueryEscape(id)
		if cursor != "" {
			uri += "&cursor=" + url.QueryEscape(cursor)
		}
		var bs []millis.Bucket
		var next string
		err := c.do(ctx, fasthttp.MethodGet, uri, nil, true, func(status int, b []byte, h *fasthttp.ResponseHeader) error {
			next = string(h.Peek("X-Next-Cursor"))
			return decodeBuckets(status, b, &bs)
		})
		if err != nil {
			return nil, err
		}
		all = append(all, millis.Buckets(bs)...)
		if next == "" {
			break
		}
		cursor = next
	}
	return all, nil
}

// decodeBuckets decodes the body of a 200 from GET /buckets: a JSON array
// of records.
func decodeBuckets(status int, b []byte, bs *[]millis.Bucket) error {
	if status != fasthttp.StatusOK {
		return errUnexpected
	}
	return json.Unmarshal(b, bs)
}

// Reset deletes the records of id, of every scale when scale is 0 (DELETE
// /buckets), sending the admin token if configured, and returns how many
// the sidecar deleted.
func (c *Client) Reset(ctx context.Context, id string, scale time.Duration) (int, error) {
	if c.hc == nil {
		return 0, errNotNew
	}
	if err := check.Reset(id, scale, c.cfg.MaxIDBytes); err != nil {
		return 0, err
	}
	u := c.base + "/buckets?id=" + url.QueryEscape(id)
	if scale != 0 {
		u += "&scale=" + strconv.FormatInt(scale.Milliseconds(), 10)
	}
	var n int
	err := c.do(ctx, fasthttp.MethodDelete, u, nil, true, func(status int, b []byte, _ *fasthttp.ResponseHeader) error {
		return decodeDeleted(status, b, &n)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// decodeDeleted decodes the body of a 200 from DELETE /buckets.
func decodeDeleted(status int, b []byte, n *int) error {
	if status != fasthttp.StatusOK {
		return errUnexpected
	}
	var out struct {
		Deleted *int `json:"deleted"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	if out.Deleted == nil {
		return errors.New(`client: answer lacks "deleted"`)
	}
	*n = *out.Deleted
	return nil
}

// errUnexpected tells do that a status was not one the call expected.
var errUnexpected = errors.New("client: unexpected status")

// do sends one request bounded by the client's timeout and ctx, and hands
// 200 and 429 answers, with their headers, to decode. Every error it
// returns is a *Error, an error rebuilt from the API's 400 body, or
// raterlimiter.ErrClosed.
func (c *Client) do(ctx context.Context, method, uri string, body []byte, admin bool, decode func(status int, body []byte, h *fasthttp.ResponseHeader) error) error {
	if c.closed.Load() {
		return rl.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return &Error{Err: err}
	}
	var deadline time.Time
	if c.cfg.Timeout > 0 {
		deadline = time.Now().Add(c.cfg.Timeout)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if admin && c.cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.AdminToken)
	}
	var err error
	if ctx.Done() == nil {
		err = c.exchange(req, resp, deadline)
	} else {
		// The exchange runs aside so that a cancellation returns at once;
		// an abandoned exchange ends by its deadline or the answer, and
		// then releases its buffers.
		done := make(chan error, 1)
		go func() { done <- c.exchange(req, resp, deadline) }()
		select {
		case err = <-done:
		case <-ctx.Done():
			go func() {
				<-done
				fasthttp.ReleaseRequest(req)
				fasthttp.ReleaseResponse(resp)
			}()
			return &Error{Err: ctx.Err()}
		}
	}
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	if err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns) {
			err = fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
		return &Error{Err: err}
	}
	return answer(resp.StatusCode(), resp.Body(), func(status int, b []byte) error { return decode(status, b, &resp.Header) })
}

// answer turns an answer into the call's error: nil when decode accepts a
// 200 or 429 body, a FieldError (in an ItemError) rebuilt from a 400 body,
// else a *Error.
func answer(status int, b []byte, decode func(status int, body []byte) error) error {
	switch {
	case status == fasthttp.StatusOK || status == fasthttp.StatusTooManyRequests:
		err := decode(status, b)
		if err == nil {
			return nil
		}
		if err != errUnexpected {
			return &Error{Status: status, msg: "bad answer: " + err.Error(), Err: err}
		}
	case status == fasthttp.StatusBadRequest:
		if err := apiInvalid(b); err != nil {
			return err
		}
	}
	return &Error{Status: status, msg: errorMessage(b)}
}

func (c *Client) exchange(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	if deadline.IsZero() {
		return c.hc.Do(req, resp)
	}
	return c.hc.DoDeadline(req, resp, deadline)
}

// apiError is the body of the API's error answers.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Index *int   `json:"index"`
}

// apiInvalid rebuilds the FieldError (within an ItemError when the body
// names an index) that a 400 body describes, or returns nil if it names no
// field.
func apiInvalid(b []byte) error {
	var e apiError
	if json.Unmarshal(b, &e) != nil || e.Field == "" {
		return nil
	}
	var err error = &rl.FieldError{Field: e.Field, Rule: e.Rule}
	if e.Index != nil {
		err = &rl.ItemError{Index: *e.Index, Err: err}
	}
	return err
}

// errorMessage returns the "error" of a JSON error body, else the body's
// start.
func errorMessage(b []byte) string {
	var e apiError
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// failOpen reports whether err should be answered with an open decision,
// telling OnDegraded about the n checks so answered.
func (c *Client) failOpen(ctx context.Context, err error, n int) bool {
	if c.cfg.FailMode != rl.FailOpen || !errors.Is(err, rl.ErrUnavailable) || errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	if c.cfg.OnDegraded != nil {
		c.cfg.OnDegraded(rl.DegradedEvent{Mode: rl.FailOpen, Checks: n, Err: err})
	}
	return true
}

func (c *Client) openDecision(r rl.Request) rl.Decision {
	return rl.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit, Now: c.cfg.Clock(), FailMode: rl.FailOpen}
}
