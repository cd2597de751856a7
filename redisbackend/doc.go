// Package redisbackend is the distributed raterlimiter backend: many sidecars
// (or embedded users) share one limit by keeping the counters in Redis, one
// node, a Redis Cluster, or a master behind Redis Sentinel.
//
// Each record lives in one key under its id's hash tag, so an id's keys
// share a Cluster slot; a fixed window is a plain counter, every other
// algorithm a small Lua script that reads and writes its key. The decision
// itself is computed by the same pure functions (package algo) as the
// embedded limiter, so both backends answer alike. docs/redis.md describes
// the keys, what a check costs and counts, the cache of denials and what
// Redis must hold.
//
// Failures: a call waits as long as its caller's deadline allows
// (Config.Timeout puts a ceiling on it). When Redis does not answer, or
// answers reads but refuses writes, a circuit breaker opens and Config.Fail
// decides until a probe (one every 100 ms) succeeds: FailClosed returns
// errors matching raterlimiter.ErrUnavailable, FailOpen allows, FailLocal
// asks Config.Fallback; the last two return their decision with a nil
// error and report it through Config.OnDegraded.
//
// Stability: the exported API is not provisional; it changes only as
// CHANGELOG.md lists. Two things are not part of it and may change in any
// release, which CHANGELOG.md then says: the layout of the keys and values
// in Redis (sidecars of two versions on one Redis then count under
// different keys, so during a rolling upgrade each version holds the limit
// on its own), and the text of its errors.
package redisbackend
