package api

import (
	"bytes"
	"time"

	"github.com/valyala/fasthttp"
)

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
	if s.cfg.Admin == AdminOnMain && s.profiles(ctx) {
		return
	}
	s.route(ctx)
}

// route answers every endpoint but the profiles.
func (s *Server) route(ctx *fasthttp.RequestCtx) {
	getOrHead := ctx.IsGet() || ctx.IsHead()
	switch string(ctx.Path()) {
	case "/check_rate":
		s.serveIf(ctx, ctx.IsGet() || ctx.IsPost(), "GET, POST", s.checkRate)
	case "/check_rates":
		s.serveIf(ctx, ctx.IsPost(), "POST", s.checkRates)
	case "/auth":
		s.auth(ctx)
	case "/reload":
		s.serveIf(ctx, ctx.IsPost(), "POST", s.reload)
	case "/buckets":
		s.serveIf(ctx, ctx.IsGet() || ctx.IsDelete(), "GET, DELETE", s.buckets)
	case "/healthz":
		s.serveIf(ctx, getOrHead, "GET, HEAD", s.healthz)
	case "/livez":
		s.serveIf(ctx, getOrHead, "GET, HEAD", s.livez)
	case "/readyz":
		s.serveIf(ctx, getOrHead, "GET, HEAD", s.readyz)
	case "/healthcheck":
		s.healthcheck(ctx)
	case "/metrics":
		s.serveIf(ctx, getOrHead, "GET, HEAD", s.serveMetrics)
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
		s.fail(ctx, fasthttp.StatusNotFound, "api: no such endpoint; see /check_rate, /check_rates, /auth, /buckets, /reload, /healthz, /livez, /readyz, /metrics, /dashboard")
	}
}

// serveIf serves the request with serve when its method is one the
// endpoint allows (ok), and answers 405 naming those (allow) otherwise.
func (s *Server) serveIf(ctx *fasthttp.RequestCtx, ok bool, allow string, serve fasthttp.RequestHandler) {
	if !ok {
		s.methodNotAllowed(ctx, allow)
		return
	}
	serve(ctx)
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
