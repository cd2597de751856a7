// Package middleware is the part of raterlimiter's HTTP middleware that does
// not depend on an HTTP stack: the policy a request is checked against, the
// trusted proxies whose X-Forwarded-For and X-Real-IP headers are believed,
// and the decision of what to answer. The middleware itself lives in
// middleware/nethttp (net/http) and middleware/fasthttpmw (fasthttp), so that
// a net/http application does not link fasthttp.
//
// Both take any raterlimiter.Checker: the embedded limiter (package memory)
// or the sidecar's client (package client). Both answer a denied request
// with 429, the contract's rate-limit headers (package headers), Retry-After
// and a short text body; an allowed request goes on to the next handler with
// the same headers set.
//
// When the limiter fails (it is down, overloaded, or times out) the
// middleware fails open by default: the request goes on without rate-limit
// headers and Config.OnError hears of it. A rate limiter protects an
// application; it should not take it down with it. Config.FailClosed answers
// 503 instead. A key the limiter refuses as invalid (too long, say, from a
// custom Key function) is never let through: it is answered 400, whatever
// the fail mode, since the requester controls it.
package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	rl "github.com/raterlimiter/raterlimiter"
)

// Policy is the limit every request is checked against: Limit requests per
// Scale milliseconds per key.
type Policy struct {
	// Scale is the window in milliseconds (1 to raterlimiter.MaxScale).
	Scale int64
	// Limit is the most requests allowed per window and key.
	Limit int64
	// Hits is how much one request counts. Default 1.
	Hits int64
	// Algo is the algorithm. Default raterlimiter.Fixed.
	Algo rl.Algo
}

// Request returns the check of one request by key.
func (p Policy) Request(key string) rl.Request {
	return rl.Request{ID: key, Scale: p.Scale, Limit: p.Limit, Hits: p.Hits, Algo: p.Algo}
}

// Config is what both middlewares share. Limiter and Policy are required;
// every other zero field means the default its comment names.
type Config struct {
	// Limiter decides the checks: an embedded limiter or a sidecar client.
	Limiter rl.Checker
	// Policy is the limit per key.
	Policy Policy
	// TrustedProxies lists the addresses ("10.0.0.1") and networks
	// ("10.0.0.0/8", "::1/128") of the proxies in front of the application.
	// Only when the peer is one of them does the default key believe
	// X-Forwarded-For (or, without it, X-Real-IP). Default: none, so the key
	// is always the peer's address.
	TrustedProxies []string
	// FailClosed answers 503 when the limiter fails. Default: fail open (the
	// request goes on, without rate-limit headers).
	FailClosed bool
	// OnError, if set, hears every error of the limiter, whatever the answer.
	// It must be safe for concurrent use.
	OnError func(error)
	// Message is the body of a 429 answer. Default: "Too many requests,
	// retry in N s" and a newline, N being Retry-After.
	Message string
}

// Outcome is what the middleware does with a request.
type Outcome uint8

const (
	// Pass lets the request go on, with the decision's headers.
	Pass Outcome = iota
	// Unlimited lets the request go on without a check: its key is empty,
	// or the limiter failed and the middleware fails open.
	Unlimited
	// Deny answers 429 with the decision's headers and Retry-After.
	Deny
	// Unavailable answers 503: the limiter failed and the middleware fails
	// closed.
	Unavailable
	// BadKey answers 400: the limiter refused the key as invalid.
	BadKey
)

// Core is the stack-independent middleware: it checks a key and says what
// to answer. It is safe for concurrent use.
type Core struct {
	limiter    rl.Checker
	policy     Policy
	proxies    Proxies
	failClosed bool
	onError    func(error)
	message    string
}

// New validates cfg and returns its Core. It fails on a missing limiter, a
// policy outside the contract's bounds, or a trusted proxy that is neither
// an address nor a network.
func New(cfg Config) (*Core, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("middleware: Config.Limiter is nil")
	}
	if cfg.Policy.Hits == 0 {
		cfg.Policy.Hits = 1
	}
	if err := cfg.Policy.Request("x").Validate(0); err != nil {
		return nil, fmt.Errorf("middleware: bad policy: %w", err)
	}
	p, err := ParseProxies(cfg.TrustedProxies...)
	if err != nil {
		return nil, err
	}
	return &Core{limiter: cfg.Limiter, policy: cfg.Policy, proxies: p,
		failClosed: cfg.FailClosed, onError: cfg.OnError, message: cfg.Message}, nil
}

// Proxies returns the trusted proxies.
func (c *Core) Proxies() Proxies { return c.proxies }

// Check decides the request whose key is key. The request and decision are
// meaningful for Pass and Deny only.
func (c *Core) Check(ctx context.Context, key string) (rl.Request, rl.Decision, Outcome) {
	if key == "" {
		return rl.Request{}, rl.Decision{}, Unlimited
	}
	r := c.policy.Request(key)
	d, err := c.limiter.CheckRate(ctx, r)
	switch {
	case err == nil && d.Allowed:
		return r, d, Pass
	case err == nil:
		return r, d, Deny
	}
	if c.onError != nil {
		c.onError(err)
	}
	switch {
	case errors.Is(err, rl.ErrInvalid):
		return r, d, BadKey
	case c.failClosed:
		return r, d, Unavailable
	}
	return r, d, Unlimited
}

// DenyBody returns the body of a 429 answer for d.
func (c *Core) DenyBody(d rl.Decision) string {
	if c.message != "" {
		return c.message
	}
	return "Too many requests, retry in " + strconv.FormatInt(max(1, (d.RetryAfterMS+999)/1000), 10) + " s\n"
}

// Bodies of the other refusals.
const (
	UnavailableBody = "Rate limiter unavailable, retry later\n"
	BadKeyBody      = "Bad request: rate-limit key refused\n"
)

// Proxies is a set of trusted proxy networks. The zero value trusts nobody.
type Proxies struct {
	nets []netip.Prefix
}

// ParseProxies parses addresses ("10.0.0.1", "::1") and networks
// ("10.0.0.0/8") into a Proxies.
func ParseProxies(list ...string) (Proxies, error) {
	var p Proxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if strings.Contains(s, "/") {
			n, err := netip.ParsePrefix(s)
			if err != nil {
				return Proxies{}, fmt.Errorf("middleware: trusted proxy %q: %w", s, err)
			}
			p.nets = append(p.nets, n.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Proxies{}, fmt.Errorf("middleware: trusted proxy %q: %w", s, err)
		}
		a = a.Unmap().WithZone("")
		p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// Trusted reports whether a is a trusted proxy.
func (p Proxies) Trusted(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns the address a request came from. If the peer is not a
// trusted proxy, that is the peer. Otherwise it walks the X-Forwarded-For
// values (forwardedFor, each a comma-separated list, in the order the
// headers came) from the right and returns the first address that is not a
// trusted proxy: addresses to its left were written by the client and prove
// nothing. If an entry does not parse, the walk stops at the address to its
// right (the last one a trusted proxy vouched for); if every entry is
// trusted, the left-most is returned. Without X-Forwarded-For, a valid
// X-Real-IP (realIP) from a trusted peer is believed. Addresses may carry a
// port; IPv4-mapped IPv6 addresses are returned as IPv4.
func (p Proxies) ClientIP(peer netip.Addr, forwardedFor []string, realIP string) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if !p.Trusted(peer) {
		return peer
	}
	last := peer
	seen := false
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		list := forwardedFor[i]
		for list != "" {
			j := strings.LastIndexByte(list, ',')
			entry := strings.TrimSpace(list[j+1:])
			list = list[:max(j, 0)]
			if entry == "" {
				continue
			}
			seen = true
			a, ok := parseAddr(entry)
			if !ok {
				return last
			}
			if !p.Trusted(a) {
				return a
			}
			last = a
		}
	}
	if !seen && realIP != "" {
		if a, ok := parseAddr(strings.TrimSpace(realIP)); ok {
			return a
		}
	}
	return last
}

// parseAddr parses "1.2.3.4", "1.2.3.4:80", "::1" or "[::1]:80".
func parseAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// PeerAddr parses a peer address as net/http's Request.RemoteAddr spells it
// ("1.2.3.4:5678", "[::1]:5678"), or a bare address.
func PeerAddr(remoteAddr string) (netip.Addr, bool) { return parseAddr(remoteAddr) }
