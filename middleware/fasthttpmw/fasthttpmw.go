// Package fasthttpmw is raterlimiter's rate-limiting middleware for
// github.com/valyala/fasthttp. See package middleware for the policy, the
// trusted proxies and what is answered when; this package only adapts them
// to fasthttp.RequestHandler.
package fasthttpmw

import (
	"context"
	"github.com/raterlimiter/raterlimiter/middleware/internal/core"
	"net"
	"net/netip"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/middleware"
)

// Config configures a Middleware: the shared middleware.Config and the key.
type Config struct {
	middleware.Config
	// Key returns the id a request is limited by; an empty id lets the
	// request through unchecked. The returned string must not alias a
	// fasthttp buffer (copy what you Peek). Default: the client's IP
	// address, as ClientIP finds it.
	Key func(ctx *fasthttp.RequestCtx) string
}

// Middleware limits the requests to a handler. It is safe for concurrent use.
type Middleware struct {
	core *core.Core
	key  func(ctx *fasthttp.RequestCtx) string
}

// New returns the middleware cfg describes, or an error if cfg is invalid
// (no limiter, a policy outside the contract's bounds, or a trusted proxy that
// is neither an address nor a network).
func New(cfg Config) (*Middleware, error) {
	c, err := core.New(cfg.Config)
	if err != nil {
		return nil, err
	}
	m := &Middleware{core: c, key: cfg.Key}
	if m.key == nil {
		m.key = m.ClientIP
	}
	return m, nil
}

// ClientIP is the default key: the peer's IP address or, when the peer is a
// trusted proxy, the address X-Forwarded-For or X-Real-IP names (see
// middleware.Config.TrustedProxies).
func (m *Middleware) ClientIP(ctx *fasthttp.RequestCtx) string {
	var peer netip.Addr
	switch a := ctx.RemoteAddr().(type) {
	case *net.TCPAddr:
		peer = a.AddrPort().Addr()
	default:
		p, ok := core.PeerAddr(a.String())
		if !ok {
			return a.String()
		}
		peer = p
	}
	p := m.core.Proxies()
	if !p.Trusted(peer) {
		return peer.Unmap().String()
	}
	var xff []string
	for _, v := range ctx.Request.Header.PeekAll("X-Forwarded-For") {
		xff = append(xff, string(v))
	}
	return p.ClientIP(peer, xff, string(ctx.Request.Header.Peek("X-Real-IP"))).String()
}

// Handler returns next behind the rate limit.
//
// The check runs under context.Background(), not the RequestCtx, which
// fasthttp recycles once the handler returns while a limiter (a sidecar
// client's transport, say) might still hold its context; the limiter's own
// timeout bounds it.
func (m *Middleware) Handler(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		req, d, out := m.core.Check(context.Background(), m.key(ctx))
		switch out {
		case core.Pass:
			// Its turn (leaky): fasthttp tells a handler nothing of a
			// requester that leaves, so the wait is Config.MaxWait's at most.
			_ = m.core.Hold(context.Background(), d)
			setHeaders(ctx, m.core.PolicyName(), req, d)
			next(ctx)
		case core.Unlimited:
			next(ctx)
		case core.Deny:
			ctx.Error(m.core.DenyBody(d), fasthttp.StatusTooManyRequests)
			setHeaders(ctx, m.core.PolicyName(), req, d) // after Error, which resets the response
		case core.Unavailable:
			ctx.Error(core.UnavailableBody, fasthttp.StatusServiceUnavailable)
			ctx.Response.Header.Set("Retry-After", "1")
		case core.BadKey:
			ctx.Error(core.BadKeyBody, fasthttp.StatusBadRequest)
		}
	}
}

// setHeaders sets the contract's headers as the sidecar does (fasthttp
// writes names in its normal form: "Ratelimit-Policy").
func setHeaders(ctx *fasthttp.RequestCtx, name string, r rl.Request, d rl.Decision) {
	var buf [64]byte
	headers.SetBytesNamed(ctx.Response.Header.SetBytesV, buf[:0], name, r, d)
}
