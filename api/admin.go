package api

import (
	"net"
	"net/http/pprof"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// AdminAccess says where the admin endpoints answer: /buckets, /reload,
// /metrics (unless MetricsPublic), /dashboard and /debug/pprof/.
type AdminAccess uint8

const (
	// AdminOnMain serves them on the main listener, behind AdminToken when
	// one is set: for a loopback listener, or with a token.
	AdminOnMain AdminAccess = iota
	// AdminRefused answers them 403 on the main listener, with a message
	// saying how to enable them: for a listener beyond loopback without a
	// token, where anyone who reaches it could reset counters.
	AdminRefused
	// AdminSeparate serves them only on ServeAdmin's listener.
	AdminSeparate
)

// adminPath reports whether path is an admin endpoint.
func adminPath(path []byte) bool {
	switch string(path) {
	case "/buckets", "/reload", "/metrics", "/dashboard", "/dashboard/data":
		return true
	}
	return strings.HasPrefix(string(path), "/debug/pprof/")
}

// adminRefusal answers an admin endpoint the main listener does not serve,
// and reports whether it did.
func (s *Server) adminRefusal(ctx *fasthttp.RequestCtx) bool {
	path := ctx.Path()
	if s.cfg.Admin == AdminOnMain || !adminPath(path) || (s.cfg.MetricsPublic && string(path) == "/metrics") {
		return false
	}
	if s.cfg.Admin == AdminSeparate {
		s.fail(ctx, fasthttp.StatusNotFound, "api: "+string(path)+" is served on the admin listener (-admin-listen), not here")
		return true
	}
	s.fail(ctx, fasthttp.StatusForbidden, "api: "+string(path)+" is off on a listener beyond loopback without an admin token: "+
		"set -admin-token-file (or RATERLIMITER_ADMIN_TOKEN), or serve admin endpoints on -admin-listen 127.0.0.1:PORT; "+
		"-metrics-public serves /metrics here")
	return true
}

// AdminHandler serves the admin endpoints (behind AdminToken when set),
// the health checks (/healthz, /livez, /readyz), and Go's profiles under
// /debug/pprof/; everything else is 404.
// It is the handler of ServeAdmin's listener, and serves callers that run
// the admin endpoints on a fasthttp.Server of their own, as Handler serves
// the main ones.
func (s *Server) AdminHandler(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.DisableNormalizing()
	if s.profiles(ctx) {
		return
	}
	if path := ctx.Path(); healthPath(path) || adminPath(path) {
		s.route(ctx)
		return
	}
	s.fail(ctx, fasthttp.StatusNotFound, "api: the admin listener serves /buckets, /reload, /metrics, /dashboard, /healthz, /livez, /readyz and /debug/pprof/")
}

// pprofHandlers are Go's profile handlers by name under /debug/pprof/;
// any other name is the index's (which serves the named runtime profiles).
var (
	pprofHandlers = map[string]fasthttp.RequestHandler{
		"cmdline": fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Cmdline),
		"profile": fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Profile),
		"symbol":  fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Symbol),
		"trace":   fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Trace),
	}
	pprofIndex = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Index)
)

// profiles answers a request under /debug/pprof/ (behind the admin token)
// and reports whether the path was one.
func (s *Server) profiles(ctx *fasthttp.RequestCtx) bool {
	name, ok := strings.CutPrefix(string(ctx.Path()), "/debug/pprof/")
	if !ok {
		return false
	}
	if s.requireAdmin(ctx, "/debug/pprof/") {
		if h := pprofHandlers[name]; h != nil {
			h(ctx)
		} else {
			pprofIndex(ctx)
		}
	}
	return true
}

// ServeAdmin serves AdminHandler on ln until Shutdown.
func (s *Server) ServeAdmin(ln net.Listener) error {
	if !s.track(ln) {
		return nil
	}
	return s.adminSrv.Serve(ln)
}
