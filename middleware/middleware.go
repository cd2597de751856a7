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
// A request whose key is empty is answered 400 ("Bad request: missing
// X-Api-Key", as Config.KeyName names it), unless Config.MissingKey lets
// it through ("skip") or counts it by the client's address ("key:ip"):
// leaving a key out never escapes the limit by default.
//
// When the limiter fails (it is down, overloaded, or times out) the
// request is answered 503 with Retry-After: 1, and Config.OnError hears of
// it. Whether a limiter that cannot reach its store lets requests through
// is decided in one place, the limiter's own fail mode
// (client.Config.FailMode, redisbackend.Config.Fail: FailOpen or
// FailLocal), whose answers come with a nil error: the middleware then
// passes or denies them as any other. A key the limiter refuses as invalid
// (too long, say, from a custom key function) is answered 400, whatever
// the fail mode, since the requester controls it.
package middleware

import rl "github.com/raterlimiter/raterlimiter"

// Config is what both middlewares share: nethttp.New and fasthttpmw.New
// take it. Limiter and Policy (or PolicyName) are required; every other
// zero field means the default its comment names.
type Config struct {
	// Limiter decides the checks: an embedded limiter (package memory), a
	// sidecar client (package client) or the Redis backend. Its fail mode
	// decides what a request gets while it cannot reach its store.
	Limiter rl.Limiter
	// Policy is the check of every request: Limit requests per Scale per
	// key, with Hits (0 counts one), Algo, Slices, Queue and Peek as
	// raterlimiter.Request has them. Its ID is ignored: the request's key
	// fills it. Limit is required: a Policy whose Limit is 0 would deny
	// every request, and is refused. MaxDelay bounds how long a request
	// waits its turn (algo Leaky, whose allowed checks may come with a
	// delay): a longer wait is a 429 that took no place in the queue; 0
	// means 10s (the sidecar's -max-wait), and any other value is a whole
	// number of milliseconds up to ten years, as for any Request. Policy
	// must be left zero with PolicyName.
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
	// Only when the peer is one of them does the client's address (the
	// default key, and MissingKey "key:ip"'s) believe X-Forwarded-For (or,
	// without it, X-Real-IP). Default: none, so it is always the peer's
	// address.
	TrustedProxies []string
	// MissingKey is what a request whose key is empty or only white space
	// gets (a custom key function returned "", say for a request without
	// its X-Api-Key header; the client's address, the default key, is
	// never empty), in the words of a gateway policy's missing_key:
	//   - "deny" (or "", the default): 400 with the body "Bad request:
	//     missing " and KeyName, counting nothing, so that leaving the key
	//     out never escapes the limit;
	//   - "skip": the request goes on unchecked, without rate-limit headers
	//     (for requests the limit does not concern, such as health checks);
	//   - "key:ip": the request is counted by the client's address (as the
	//     default key reads it) instead, under counters of their own: the
	//     id is the address after "\x00missing_key\x00", which no header
	//     can hold, so a client that sends an address as its key never
	//     spends the budget of the callers without one.
	// New refuses any other value.
	MissingKey string
	// KeyName is what the answer to a request without its key calls the
	// key: "X-Api-Key" answers "Bad request: missing X-Api-Key". Default:
	// "rate-limit key".
	KeyName string
	// OnError, if set, hears every error of the limiter: the request was
	// answered 503 (the limiter failed) or 400 (it refused the key). It
	// must be safe for concurrent use.
	OnError func(error)
}
