package api

import "github.com/valyala/fasthttp"

// healthcheck is envoyproxy/ratelimit's probe path, for deployments moved
// over from it: whatever the method, 200 and "OK" when /healthz answers
// 200 (checks are answered, degraded or not), else 500 and no body, as
// that service answers.
func (s *Server) healthcheck(ctx *fasthttp.RequestCtx) {
	s.healthz(ctx)
	ok := ctx.Response.StatusCode() == fasthttp.StatusOK
	ctx.Response.ResetBody()
	for _, h := range []string{DegradedHeader, StaleHeader, "Retry-After"} {
		ctx.Response.Header.Del(h)
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	if ok {
		ctx.SetBodyString("OK")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusInternalServerError)
}
