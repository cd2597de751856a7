package api

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/checkmetric"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// DegradedHeader is set, to the backend's fail mode ("open" or "local"), on
// answers a backend decided without its shared state: the Redis backend
// under -redis-fail open or local, while Redis does not answer
// (rl.Decision.FailMode).
const DegradedHeader = "X-RateLimit-Degraded"

// markDegraded sets DegradedHeader when d was decided by the fail mode.
func markDegraded(ctx *fasthttp.RequestCtx, d rl.Decision) {
	if d.Degraded() {
		ctx.Response.Header.Set(DegradedHeader, d.FailMode.String())
	}
}

// limiterFailed answers a request the limiter refused and returns the
// result to count.
func (s *Server) limiterFailed(ctx *fasthttp.RequestCtx, err error) checkmetric.Result {
	switch {
	case errors.Is(err, rl.ErrInvalid):
		s.invalid(ctx, err)
		return checkmetric.Invalid
	case errors.Is(err, rl.ErrUnavailable), errors.Is(err, rl.ErrClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// Retry-After: a client that backs off a second gives an overloaded
		// or reconnecting backend room; the check was not counted.
		ctx.Response.Header.Set("Retry-After", "1")
		s.fail(ctx, fasthttp.StatusServiceUnavailable, "api: the limiter cannot answer now: "+err.Error())
		return checkmetric.Unavailable
	}
	s.cfg.Logger.Error("api: the limiter failed", "err", err)
	s.fail(ctx, fasthttp.StatusInternalServerError, "api: internal error")
	return checkmetric.Unavailable
}

// invalid answers 400 for err, naming the field and the rule (and the index
// of a batch item) in keys of their own.
func (s *Server) invalid(ctx *fasthttp.RequestCtx, err error) {
	err = check.Wire(err)
	b := append([]byte(nil), `{"error":`...)
	b = appendString(b, strings.TrimPrefix(err.Error(), "raterlimiter: "))
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
		s.cfg.Logger.Error("api: encoding a response", "err", err)
		s.fail(ctx, fasthttp.StatusInternalServerError, "api: internal error")
		return
	}
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// errorHandler answers requests fasthttp could not read, in JSON. An /auth
// request it could not read (headers past readBufferSize, a header line
// fasthttp refuses) is denied, as /auth denies: what a client sends
// through the proxy must never make /auth answer an error, which nginx
// turns into a 500 and a fail-open configuration into no limit at all.
func (s *Server) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var timeout interface{ Timeout() bool }
	switch {
	case s.denyUnread(ctx, err):
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

// denyUnread denies an /auth request fasthttp could not read, and reports
// whether it was one. Its request line is what the connection saw first
// (limitConn keeps it); a server without policies or -auth-headers
// answers the error as for any other path.
func (s *Server) denyUnread(ctx *fasthttp.RequestCtx, err error) bool {
	if s.pols.Load() == nil || s.cfg.AuthHeaders == policy.GatewayUnset {
		return false
	}
	lc, ok := ctx.Conn().(*limitConn)
	if !ok {
		return false
	}
	target, ok := authTarget(lc.requestLine())
	if !ok {
		return false
	}
	status := s.cfg.AuthDenyStatus
	if _, q, found := bytes.Cut(target, []byte("?")); found && s.cfg.AuthHeaders == policy.GatewayNginx {
		var args fasthttp.Args
		args.ParseBytes(q)
		if st, ok := denyStatusOf(args.Peek("deny_status")); ok {
			status = st
		}
	}
	if small := (*fasthttp.ErrSmallBuffer)(nil); errors.As(err, &small) {
		lc.drainHead(unreadHeadBytes, unreadHeadTime)
	}
	s.cfg.Logger.Debug("api: /auth request not read: denied", "err", err)
	s.metrics.check(endpointAuth, rl.Fixed, checkmetric.Denied)
	ctx.SetConnectionClose()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"allowed":false,"error":"api: /auth: the request could not be read (headers larger than the server reads, or a header line it refuses)"}`)
	return true
}

// What denyUnread reads of a head too big to hold before it answers: Go's
// net/http (Caddy, Traefik) passes heads of up to 1 MiB.
const (
	unreadHeadBytes = 1 << 20
	unreadHeadTime  = 500 * time.Millisecond
)

// authTarget returns the target of a request line for /auth ("GET
// /auth?deny_status=403 HTTP/1.1"), or false for any other.
func authTarget(line []byte) ([]byte, bool) {
	_, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return nil, false
	}
	target, _, _ := bytes.Cut(rest, []byte(" "))
	path, _, _ := bytes.Cut(target, []byte("?"))
	return target, string(path) == "/auth"
}

// denyStatusOf reads a deny_status: 401, 403 or 429.
func denyStatusOf(v []byte) (int, bool) {
	switch string(v) {
	case "401":
		return fasthttp.StatusUnauthorized, true
	case "403":
		return fasthttp.StatusForbidden, true
	case "429":
		return fasthttp.StatusTooManyRequests, true
	}
	return 0, false
}
