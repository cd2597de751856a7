// Package middleware holds what raterlimiter's HTTP middlewares share and
// do not depend on an HTTP stack for: their Config, whose Policy is the
// check of every request. The middleware itself lives in middleware/nethttp
// (net/http) and middleware/fasthttpmw (fasthttp), so that a net/http
// application does not link fasthttp; each exports New alone.
//
// Both take any raterlimiter.Limiter: the embedded limiter (package
// memory), the sidecar's client (package client) or the Redis backend.
// Both answer a denied request with 429, the contract's rate-limit
// headers, Retry-After and a short text body ("Too many requests, retry
// in N s"); an allowed request goes on to the next handler with the same
// headers set, after its turn when the algorithm (leaky) queues it
// (Config.Policy.MaxDelay bounds the wait).
//
// When the limiter fails (it is down, overloaded, or times out) the
// middleware fails open by default: the request goes on without rate-limit
// headers and Config.OnError hears of it. A rate limiter protects an
// application; it should not take it down with it. Config.FailClosed answers
// 503 instead. A key the limiter refuses as invalid (too long, say, from a
// custom key function) is never let through: it is answered 400, whatever
// the fail mode, since the requester controls it.
package middleware

import rl "github.com/raterlimiter/raterlimiter"

// Config is what both middlewares share: nethttp.New and fasthttpmw.New
// take it. Limiter and Policy (or PolicyName) are required; every other
// zero field means the default its comment names.
type Config struct {
	// Limiter decides the checks: an embedded limiter (package memory), a
	// sidecar client (package client) or the Redis backend.
	Limiter rl.Limiter
	// Policy is the check of every request: Limit requests per Scale per
	// key, with Hits (0 counts one), Algo, Slices, Queue and Peek as
	// raterlimiter.Request has them. Its ID is ignored: the request's key
	// fills it. MaxDelay bounds how long a request waits its turn (algo
	// Leaky, whose allowed checks may come with a delay): a longer wait is
	// a 429 that took no place in the queue; 0 means 10 s (the sidecar's
	// -max-wait), and any other value is a whole number of milliseconds up
	// to ten years, as for any Request. Policy is not used with PolicyName.
	Policy rl.Request
	// PolicyName, if set, checks every request by the sidecar's policy of
	// that name (gateway mode) instead of Policy: the sidecar owns the
	// limit, and Limiter must have the method CheckPolicy(ctx, policy, id
	// string, hits int64) (raterlimiter.Decision, raterlimiter.Request,
	// error), as the sidecar's client does. The headers name the policy.
	// The middleware does not wait: a policy with wait: true makes the
	// sidecar hold the answer instead.
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
}
