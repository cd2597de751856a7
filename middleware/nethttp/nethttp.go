// Package nethttp is raterlimiter's rate-limiting middleware for net/http.
// See package middleware for the policy, the trusted proxies and what is
// answered when; this package only adapts them to http.Handler.
package nethttp

import (
	"github.com/raterlimiter/raterlimiter/middleware/internal/core"
	"net/http"
	"strconv"

	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/middleware"
)

// Config configures a Middleware: the shared middleware.Config and the key.
type Config struct {
	middleware.Config
	// Key returns the id a request is limited by; an empty id lets the
	// request through unchecked (use it to exempt health checks, say).
	// Default: the client's IP address, as ClientIP finds it.
	Key func(r *http.Request) string
}

// Middleware limits the requests to a handler. It is safe for concurrent use.
type Middleware struct {
	core  *core.Core
	key   func(r *http.Request) string
	canon map[string]string // header name -> its canonical form, read only
}

// New returns the middleware cfg describes, or an error if cfg is invalid
// (no limiter, a policy outside the contract's bounds, or a trusted proxy that
// is neither an address nor a network).
func New(cfg Config) (*Middleware, error) {
	c, err := core.New(cfg.Config)
	if err != nil {
		return nil, err
	}
	m := &Middleware{core: c, key: cfg.Key, canon: map[string]string{}}
	for _, k := range []string{headers.Policy, headers.RateLimit, headers.Limit, headers.Remaining, headers.Reset, headers.RetryAfter} {
		m.canon[k] = http.CanonicalHeaderKey(k)
	}
	if m.key == nil {
		m.key = m.ClientIP
	}
	return m, nil
}

// ClientIP is the default key: the peer's IP address or, when the peer is a
// trusted proxy, the address X-Forwarded-For or X-Real-IP names (see
// middleware.Config.TrustedProxies). A RemoteAddr that is not an IP address (a
// Unix socket, say) is used as it is.
func (m *Middleware) ClientIP(r *http.Request) string {
	peer, ok := core.PeerAddr(r.RemoteAddr)
	if !ok {
		if r.RemoteAddr == "" {
			return "unknown"
		}
		return r.RemoteAddr
	}
	return m.core.Proxies().ClientIP(peer, r.Header.Values("X-Forwarded-For"), r.Header.Get("X-Real-IP")).String()
}

// Handler returns next behind the rate limit.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, d, out := m.core.Check(r.Context(), m.key(r))
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
			headers.SetNamed(set, m.core.PolicyName(), req, d)
			next.ServeHTTP(w, r)
		case core.Unlimited:
			next.ServeHTTP(w, r)
		case core.Deny:
			headers.SetNamed(set, m.core.PolicyName(), req, d)
			writeText(w, http.StatusTooManyRequests, m.core.DenyBody(d))
		case core.Unavailable:
			h.Set("Retry-After", "1")
			writeText(w, http.StatusServiceUnavailable, core.UnavailableBody)
		case core.BadKey:
			writeText(w, http.StatusBadRequest, core.BadKeyBody)
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
