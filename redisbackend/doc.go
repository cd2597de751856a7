// Package redisbackend is the distributed raterlimiter backend: many sidecars
// (or embedded users) share one limit by keeping the counters in Redis, one
// node, a Redis Cluster, or a master behind Redis Sentinel.
//
// Each algorithm does on Redis no more than it must: a fixed window is a
// counter per window (SET NX PX and INCRBY, pipelined, no script); the
// sliding window, the token bucket, the log, the sliding window counters and
// the leaky bucket each have a small atomic Lua script of their own
// (EVALSHA, reloaded on NOSCRIPT) that reads and writes one key. The script
// applies the state change; the decision itself is computed by the same
// pure functions (package algo) as the embedded limiter, from the state the
// script read, so both backends answer alike. (The log's script decides in
// Redis by the same rules: its hits do not fit in an answer.)
// The scripts decide at the client's clock, or with Config.Deadlines at
// Redis's TIME, refusing to count a check Redis runs after its caller's
// deadline.
//
// Keys: an id's keys share one hash tag, {base64url(id)}, so they live in one
// Cluster slot and ids of any bytes are safe; every command names one key.
// Each record expires at the end of the last window that can read it. An
// index hash per id lists its records for Buckets and Reset, so neither
// needs SCAN; the checks write it only when a record is new or its expiry
// passes into a new index epoch.
//
// A cache of denials keeps the state Redis denied a request from and decides
// the record's later requests from it, answering denials without Redis, so
// a flood on a denied key costs Redis almost nothing.
//
// Failures: a call waits as long as its caller's deadline allows
// (Config.Timeout puts a ceiling on it). When Redis does not answer, a
// circuit breaker opens: further calls do not wait on Redis, except one
// probe every 100 ms, until Redis answers again. A Redis that
// answers reads but refuses writes (OOM at maxmemory with noeviction,
// MISCONF after a failed save, a replica) cannot count a check: it opens
// the circuit too, which then closes only once a write succeeds. Meanwhile
// Config.Fail decides: FailClosed returns errors matching
// raterlimiter.ErrUnavailable, FailOpen allows, FailLocal asks
// Config.Fallback. The last two return their decision with a nil error, as
// the client's FailOpen does, and report it through Config.OnDegraded.
//
// Stability: the exported API is not provisional; it changes only as
// CHANGELOG.md lists. Two things are not part of it and may change in any
// release, which CHANGELOG.md then says: the layout of the keys and values
// in Redis (sidecars of two versions on one Redis then count under
// different keys, so during a rolling upgrade each version holds the limit
// on its own), and the text of its errors.
package redisbackend
