// Package middleware holds what raterlimiter's HTTP middlewares share and
// do not depend on an HTTP stack for: their Config and the Policy a request
// is checked against. The middleware itself lives in middleware/nethttp
// (net/http) and middleware/fasthttpmw (fasthttp), so that a net/http
// application does not link fasthttp.
//
// Both take any raterlimiter.Checker: the embedded limiter (package memory)
// or the sidecar's client (package client). Both answer a denied request
// with 429, the contract's rate-limit headers, Retry-After
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
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// Policy is the limit every request is checked against: Limit requests per
// Scale per key.
type Policy struct {
	// Scale is the window: a whole number of milliseconds, from one to
	// ten years.
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
	// the queue. Default 10 s (the sidecar's -max-wait). With PolicyName the middleware
	// does not wait: a policy with wait: true makes the sidecar hold the
	// answer instead.
	MaxWait time.Duration
}
