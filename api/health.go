package api

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
)

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	c, cancel := context.WithTimeout(context.Background(), min(s.cfg.Timeout, time.Second))
	defer cancel()
	if p, ok := s.cfg.Limiter.(pinger); ok {
		// What a peek cannot show (Redis refusing writes) reaches the
		// backend's circuit, which the peek then answers by.
		_ = p.Ping(c)
	}
	d, err := s.cfg.Limiter.CheckRate(c, rl.Request{ID: healthID, Scale: time.Second, Limit: 1, Peek: true})
	if err != nil {
		s.limiterFailed(ctx, err)
		return
	}
	if d.Degraded() {
		// Checks are answered, without the shared state: healthy enough to
		// keep serving, and saying so.
		markDegraded(ctx, d)
		plainText(ctx, "degraded: "+d.FailMode.String())
		return
	}
	if s.cfg.Stale != nil {
		if msg := s.cfg.Stale(); msg != "" {
			ctx.Response.Header.Set(StaleHeader, msg)
			plainText(ctx, "ok; "+msg)
			return
		}
	}
	plainText(ctx, "ok")
}

// plainText answers body as text.
func plainText(ctx *fasthttp.RequestCtx, body string) {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(body)
}

// livez answers 200 while the server serves, whatever its backend: the
// liveness probe. A backend that is down is no reason to restart the
// process (a restart would not bring it back), so it asks nothing.
func (s *Server) livez(ctx *fasthttp.RequestCtx) { plainText(ctx, "ok") }

// readyz answers 200 when the backend answers its health check within
// min(Timeout, 1s), and 503 otherwise: the readiness probe. The policies
// and the RLS configuration are loaded before the server serves, so a
// server that answers has them. A backend without a health check (memory)
// is ready once it serves; the Redis backend is ready while Redis accepts
// a write, whatever its fail mode answers checks with meanwhile.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	if p, ok := s.cfg.Limiter.(pinger); ok {
		c, cancel := context.WithTimeout(context.Background(), min(s.cfg.Timeout, time.Second))
		defer cancel()
		if err := p.Ping(c); err != nil {
			ctx.Response.Header.Set("Retry-After", "1")
			s.fail(ctx, fasthttp.StatusServiceUnavailable, "api: not ready: the backend does not answer: "+err.Error())
			return
		}
	}
	plainText(ctx, "ok")
}

// healthPath reports whether path is one of the health checks, which both
// listeners serve.
func healthPath(path []byte) bool {
	switch string(path) {
	case "/healthz", "/livez", "/readyz":
		return true
	}
	return false
}

// pinger is a backend that can say more of its health than a peek shows:
// the Redis backend asks whether Redis accepts writes, which a Redis full at
// maxmemory (noeviction) or after a failed save (MISCONF) refuses while it
// still answers reads.
type pinger interface {
	Ping(ctx context.Context) error
}

// StaleHeader is set on /healthz when something the sidecar keeps is stale
// (a snapshot not written for three intervals).
const StaleHeader = "X-RateLimiter-Stale"
