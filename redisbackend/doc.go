// Package redisbackend is the distributed raterlimiter backend: many sidecars
// (or embedded users) share one limit by keeping the counters in Redis, one
// node or a Redis Cluster.
//
// Every decision is one atomic Lua script (EVALSHA, reloaded on NOSCRIPT) that
// reads the time from Redis (TIME), so hosts with skewed clocks agree. The
// script applies the state change; the decision itself is computed by the
// same pure functions (package algo) as the embedded limiter, from the state
// the script read, so both backends answer alike.
//
// Keys: an id's keys share one hash tag, {base64url(id)}, so they live in one
// Cluster slot and ids of any bytes are safe. Each (id, algo, scale) is one
// hash (the current window's record, and for sliding the previous one), with a
// TTL at the end of the last window that can read it; an index hash per id
// lists them for Buckets and Reset, so neither needs SCAN.
//
// Failures: every call has a short timeout (Config.Timeout). When Redis does
// not answer, a circuit breaker opens: further calls do not wait on Redis,
// except one probe per Config.ProbeInterval, until Redis answers again. Meanwhile
// Config.Fail decides: FailClosed returns errors matching
// raterlimiter.ErrUnavailable, FailOpen allows, FailLocal asks Config.Fallback.
// The last two say so with a *DegradedError next to the decision.
package redisbackend
