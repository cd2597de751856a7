// Package fasthttpmw is raterlimiter's rate-limiting middleware for
// github.com/valyala/fasthttp. See package middleware for the policy, the
// trusted proxies and what is answered when; this package only adapts them
// to fasthttp.RequestHandler.
package fasthttpmw

import (
	"context"
	"net"
	"net/netip"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/clientip"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/internal/core"
)

// New returns the middleware cfg describes: a function that puts a
// handler behind the rate limit. It is safe for concurrent use.
//
// key returns the id a request is limited by; an empty one (or only white
// space: a header left out) gets cfg.MissingKey, a 400 by default. The
// returned string must not alias a fasthttp buffer (copy what you Peek).
// A nil key is the client's IP address: the peer's or, when the peer is
// one of cfg.TrustedProxies, the address X-Forwarded-For or X-Real-IP
// names.
//
// New fails if cfg is invalid: no limiter, a policy without a limit or
// outside the contract's bounds, a Policy beside PolicyName, a PolicyName
// with a limiter that cannot check by policy, an unknown MissingKey, or a
// trusted proxy that is neither an address nor a network.
//
// The check runs under context.Background(), not the RequestCtx, which
// fasthttp recycles once the handler returns while a limiter (a sidecar
// client's transport, say) might still hold its context; the limiter's own
// timeout bounds it.
func New(cfg middleware.Config, key func(*fasthttp.RequestCtx) string) (func(fasthttp.RequestHandler) fasthttp.RequestHandler, error) {
	c, err := core.New(cfg)
	if err != nil {
		return nil, err
	}
	m := &limiter{core: c, key: key}
	if m.key == nil {
		m.key = m.clientIP
	}
	return m.handler, nil
}

// limiter limits the requests to a handler.
type limiter struct {
	core *core.Core
	key  func(ctx *fasthttp.RequestCtx) string
}

// clientIP is the default key (see New).
func (m *limiter) clientIP(ctx *fasthttp.RequestCtx) string {
	var peer netip.Addr
	switch a := ctx.RemoteAddr().(type) {
	case *net.TCPAddr:
		peer = a.AddrPort().Addr()
	default:
		p, ok := clientip.ParseAddr(a.String())
		if !ok {
			return a.String()
		}
		peer = p
	}
	p := m.core.Proxies()
	if !p.Trusted(peer) {
		return peer.Unmap().String()
	}
	return p.ClientIPBytes(peer, ctx.Request.Header.PeekAll("X-Forwarded-For"), ctx.Request.Header.Peek("X-Real-IP")).String()
}

// handler returns next behind the rate limit.
func (m *limiter) handler(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		req, d, out := m.core.Check(context.Background(), m.key(ctx), func() string { return m.clientIP(ctx) })
		switch out {
		case core.Pass:
			// Its turn (leaky): fasthttp tells a handler nothing of a
			// requester that leaves, so the wait is Config.Policy.MaxDelay's at most.
			_ = m.core.Hold(context.Background(), d)
			setHeaders(ctx, m.core.PolicyName(), req, d)
			next(ctx)
		case core.Unlimited:
			next(ctx)
		case core.Deny:
			ctx.Error(core.DenyBody(d), fasthttp.StatusTooManyRequests)
			setHeaders(ctx, m.core.PolicyName(), req, d) // after Error, which resets the response
		case core.Unavailable:
			ctx.Error(core.UnavailableBody, fasthttp.StatusServiceUnavailable)
			ctx.Response.Header.Set("Retry-After", "1")
		case core.BadKey:
			ctx.Error(core.BadKeyBody, fasthttp.StatusBadRequest)
		case core.NoKey:
			ctx.Error(m.core.NoKeyBody(), fasthttp.StatusBadRequest)
		}
	}
}

// setHeaders sets the contract's headers as the sidecar does (fasthttp
// writes names in its normal form: "Ratelimit-Policy").
func setHeaders(ctx *fasthttp.RequestCtx, name string, r rl.Request, d rl.Decision) {
	var buf [64]byte
	headers.SetBytes(ctx.Response.Header.SetBytesV, buf[:0], name, r, d)
}
