// Package nethttp is raterlimiter's rate-limiting middleware for net/http.
// See package middleware for the policy, the trusted proxies and what is
// answered when; this package only adapts them to http.Handler.
package nethttp

import (
	"net/http"
	"strconv"

	"github.com/raterlimiter/raterlimiter/internal/clientip"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/internal/core"
)

// New returns the middleware cfg describes: a function that puts a handler
// behind the rate limit. It is safe for concurrent use.
//
// key returns the id a request is limited by; an empty one (or only white
// space: a header left out) gets cfg.MissingKey, a 400 by default. A nil
// key is the client's IP address: the peer's or, when the peer is one of
// cfg.TrustedProxies, the address X-Forwarded-For or X-Real-IP names. A
// RemoteAddr that is not an IP address (a Unix socket, say) is used as it
// is.
//
// New fails if cfg is invalid: no limiter, a policy without a limit or
// outside the contract's bounds, a Policy beside PolicyName, a PolicyName
// with a limiter that cannot check by policy, an unknown MissingKey, or a
// trusted proxy that is neither an address nor a network.
func New(cfg middleware.Config, key func(*http.Request) string) (func(http.Handler) http.Handler, error) {
	c, err := core.New(cfg)
	if err != nil {
		return nil, err
	}
	m := &limiter{core: c, key: key, canon: map[string]string{}}
	for _, k := range []string{headers.Policy, headers.RateLimit, headers.Limit, headers.Remaining, headers.Reset, headers.RetryAfter} {
		m.canon[k] = http.CanonicalHeaderKey(k)
	}
	if m.key == nil {
		m.key = m.clientIP
	}
	return m.handler, nil
}

// limiter limits the requests to a handler.
type limiter struct {
	core  *core.Core
	key   func(r *http.Request) string
	canon map[string]string // header name -> its canonical form, read only
}

// clientIP is the default key (see New).
func (m *limiter) clientIP(r *http.Request) string {
	peer, ok := clientip.ParseAddr(r.RemoteAddr)
	if !ok {
		if r.RemoteAddr == "" {
			return "unknown"
		}
		return r.RemoteAddr
	}
	return m.core.Proxies().ClientIP(peer, r.Header.Values("X-Forwarded-For"), r.Header.Get("X-Real-IP")).String()
}

// handler returns next behind the rate limit.
func (m *limiter) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, d, out := m.core.Check(r.Context(), m.key(r), func() string { return m.clientIP(r) })
		h := w.Header()
		// As h.Set, without canonicalising the same names on every request.
		set := func(k, v string) {
			c, ok := m.canon[k]
			if !ok {
				c = http.CanonicalHeaderKey(k)
			}
			h[c] = []string{v}
		}
		switch out {
		case core.Pass:
			if m.core.Hold(r.Context(), d) != nil {
				return // the requester left while waiting its turn
			}
			headers.Set(set, m.core.PolicyName(), req, d)
			next.ServeHTTP(w, r)
		case core.Unlimited:
			next.ServeHTTP(w, r)
		case core.Deny:
			headers.Set(set, m.core.PolicyName(), req, d)
			writeText(w, http.StatusTooManyRequests, core.DenyBody(d))
		case core.Unavailable:
			h.Set("Retry-After", "1")
			writeText(w, http.StatusServiceUnavailable, core.UnavailableBody)
		case core.BadKey:
			writeText(w, http.StatusBadRequest, core.BadKeyBody)
		case core.NoKey:
			writeText(w, http.StatusBadRequest, m.core.NoKeyBody())
		}
	})
}

func writeText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
