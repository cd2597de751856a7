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
// the same headers set, after its turn when the algorithm (leaky) queues it
// (Config.MaxWait bounds the wait).
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
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/internal/policy"
)

// Policy is the limit every request is checked against: Limit requests per
// Scale per key.
type Policy struct {
	// Scale is the window: a whole number of milliseconds, from one to
	// raterlimiter.MaxScale.
	Scale time.Duration
	// Limit is the most requests allowed per window and key.
	Limit int64
	// Hits is how much one request counts. Default 1.
	Hits int64
	// Algo is the algorithm. Default raterlimiter.Fixed.
	Algo rl.Algo
	// Slices is the slice count of algo Slices (0: the default), Queue how
	// many requests may wait their turn with algo Leaky (see
	// raterlimiter.Request).
	Slices, Queue int64
}

// Request returns the check of one request by key.
func (p Policy) Request(key string) rl.Request {
	return rl.Request{ID: key, Scale: p.Scale, Limit: p.Limit, Hits: p.Hits, Algo: p.Algo, Slices: p.Slices, Queue: p.Queue}
}

// DefaultMaxWait is Config.MaxWait's default, the sidecar's -max-wait.
const DefaultMaxWait = 10 * time.Second

// Config is what both middlewares share. Limiter and Policy are required;
// every other zero field means the default its comment names.
type Config struct {
	// Limiter decides the checks: an embedded limiter or a sidecar client.
	Limiter rl.Checker
	// Policy is the limit per key. It is not used with PolicyName.
	Policy Policy
	// PolicyName, if set, checks every request by the sidecar's policy of
	// that name (gateway mode) instead of Policy: the sidecar owns the
	// limit, and Limiter must implement raterlimiter.PolicyChecker (the
	// sidecar's client does). The headers name the policy.
	PolicyName string
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
	// MaxWait bounds how long a request waits its turn (algo Leaky, whose
	// allowed checks may come with a delay): the check carries it as its
	// bound on the delay, so a longer wait is a 429 that took no place in
	// the queue. Default DefaultMaxWait. With PolicyName the middleware
	// does not wait: a policy with wait: true makes the sidecar hold the
	// answer instead.
	MaxWait time.Duration
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
	byName     rl.PolicyChecker // with Config.PolicyName
	name       string           // the headers' policy name
	proxies    Proxies
	failClosed bool
	onError    func(error)
	message    string
	maxWait    time.Duration // with policy: the bound on a check's delay
}

// New validates cfg and returns its Core. It fails on a missing limiter, a
// policy outside the contract's bounds, or a trusted proxy that is neither
// an address nor a network.
func New(cfg Config) (*Core, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("middleware: Config.Limiter is nil")
	}
	c := &Core{limiter: cfg.Limiter, policy: cfg.Policy, name: headers.PolicyName,
		failClosed: cfg.FailClosed, onError: cfg.OnError, message: cfg.Message}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	c.maxWait = min(max(cfg.MaxWait.Truncate(time.Millisecond), time.Millisecond), rl.MaxScale)
	if cfg.PolicyName != "" {
		pc, ok := cfg.Limiter.(rl.PolicyChecker)
		if !ok {
			return nil, fmt.Errorf("middleware: Config.PolicyName needs a limiter that checks by policy (the sidecar's client), not %T", cfg.Limiter)
		}
		c.byName, c.name = pc, cfg.PolicyName
	} else {
		if c.policy.Hits == 0 {
			c.policy.Hits = 1
		}
		if err := c.policy.Request("x").Validate(0); err != nil {
			return nil, fmt.Errorf("middleware: bad policy: %w", err)
		}
	}
	p, err := ParseProxies(cfg.TrustedProxies...)
	if err != nil {
		return nil, err
	}
	c.proxies = p
	return c, nil
}

// PolicyName is the name the RateLimit headers give the policy: "default",
// or Config.PolicyName.
func (c *Core) PolicyName() string { return c.name }

// Proxies returns the trusted proxies.
func (c *Core) Proxies() Proxies { return c.proxies }

// Check decides the request whose key is key. The request and decision are
// meaningful for Pass and Deny only.
func (c *Core) Check(ctx context.Context, key string) (rl.Request, rl.Decision, Outcome) {
	if key == "" {
		return rl.Request{}, rl.Decision{}, Unlimited
	}
	var r rl.Request
	var d rl.Decision
	var err error
	if c.byName != nil {
		d, r, err = c.byName.CheckPolicy(ctx, c.name, key, 0)
	} else {
		r = c.policy.Request(key)
		r.MaxDelay = c.maxWait
		d, err = c.limiter.CheckRate(ctx, r)
	}
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

// Hold waits the turn of an allowed request whose decision came with a
// delay (algo Leaky; at most Config.MaxWait, which the check was bounded
// by) before it goes on, or until ctx ends, whose error it returns: the
// requester is gone. With PolicyName it returns at once (the sidecar
// holds the answers of a policy that waits).
func (c *Core) Hold(ctx context.Context, d rl.Decision) error {
	if c.byName != nil || !d.Allowed || d.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DenyBody returns the body of a 429 answer for d.
func (c *Core) DenyBody(d rl.Decision) string {
	if c.message != "" {
		return c.message
	}
	return "Too many requests, retry in " + strconv.FormatInt(max(1, int64((d.RetryAfter+time.Second-1)/time.Second)), 10) + " s\n"
}

// Bodies of the other refusals.
const (
	UnavailableBody = "Rate limiter unavailable, retry later\n"
	BadKeyBody      = "Bad request: rate-limit key refused\n"
)

// Proxies is a set of trusted proxy networks (see policy.Proxies, whose
// ClientIP walks X-Forwarded-For). The zero value trusts nobody.
type Proxies = policy.Proxies

// ParseProxies parses addresses ("10.0.0.1", "::1") and networks
// ("10.0.0.0/8") into a Proxies.
func ParseProxies(list ...string) (Proxies, error) {
	p, err := policy.ParseProxies(list...)
	if err != nil {
		return Proxies{}, fmt.Errorf("middleware: %s", strings.TrimPrefix(err.Error(), "policy: "))
	}
	return p, nil
}

// PeerAddr parses a peer address as net/http's Request.RemoteAddr spells it
// ("1.2.3.4:5678", "[::1]:5678"), or a bare address.
func PeerAddr(remoteAddr string) (netip.Addr, bool) { return policy.ParseAddr(remoteAddr) }
