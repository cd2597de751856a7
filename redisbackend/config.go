package redisbackend

import (
	"crypto/tls"
	"log/slog"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// Defaults of Config's zero fields.
const (
	// defaultURL is the Redis of Config.URL's zero value.
	defaultURL = "redis://127.0.0.1:6379/0"
	// defaultPrefix starts every key.
	defaultPrefix = "rl"
	// defaultCallTimeout bounds a call whose context has no deadline.
	defaultCallTimeout = time.Second
	// defaultProbeInterval is how often an open circuit lets one call try
	// Redis: soon after it opens, and as often after.
	defaultProbeInterval = 100 * time.Millisecond
	// maxConnectBackoff is the longest pause between two attempts to make
	// the first connection: Redis coming up is noticed within it.
	maxConnectBackoff = time.Second
	// defaultDownAfter is how long calls may go unanswered (their callers'
	// deadlines passing) with no success at all before the circuit opens:
	// well beyond a stall (a fork, a pause, a blip), which costs latency,
	// not answers.
	defaultDownAfter = 2 * time.Second
	// defaultMaxInFlight bounds the calls to Redis at once; the rest wait
	// their turn (rueidis pipelines what is in flight).
	defaultMaxInFlight = 512
	// maxQueued bounds the calls waiting for a turn; beyond it a call is
	// shed at once (503, not counted).
	maxQueued = 8192
	// defaultDenyCache is how many ids' denials the local cache keeps: a
	// few hundred bytes each.
	defaultDenyCache = 65536
)

// Config configures a Backend. Every zero field means the default its comment
// names.
type Config struct {
	// URL names the Redis: redis://[user:password@]host:port[/db] for one
	// node, rediss:// for TLS, and for a Cluster any node, more with
	// ?addr=host:port&addr=host:port (the client discovers a Cluster by
	// itself). Default redis://127.0.0.1:6379/0.
	URL string
	// TLS, if set, replaces the TLS settings of a rediss:// URL (a private CA,
	// a client certificate).
	TLS *tls.Config
	// Prefix starts every key, so several limiters can share a Redis.
	// Default "rl".
	Prefix string
	// Timeout, if positive, is a ceiling on a call's wait for Redis, past
	// which Redis counts as unavailable (the circuit and Fail apply). Zero
	// (the default) or negative, none: a call waits as long as its
	// caller's deadline allows (1s without one), and a caller giving up is
	// only a caller giving up, never a reason to open the circuit.
	Timeout time.Duration
	// DownAfter is how long calls may fail to get any answer before the
	// circuit opens. Default 2s.
	DownAfter time.Duration
	// MaxInFlight bounds the calls to Redis at once; the rest wait their
	// turn, and beyond 8,192 waiting a call is shed at once with an error
	// matching raterlimiter.ErrUnavailable. Default 512.
	MaxInFlight int
	// Fail is what to do while Redis does not answer. rl.FailClosed, the
	// default, fails the call with an error matching
	// raterlimiter.ErrUnavailable (the sidecar answers 503). rl.FailOpen
	// allows every request: the decision has Allowed, Count 0 and
	// Remaining = Limit, with a nil error. rl.FailLocal decides with
	// Fallback, a limiter of this process alone, and returns its decision
	// with a nil error. OnDegraded reports both.
	Fail rl.FailMode
	// Fallback decides while Redis does not answer, with Fail = FailLocal
	// (which requires it: without it New fails with a
	// *raterlimiter.FieldError of "Fallback"). The sidecar passes an
	// embedded limiter.
	Fallback rl.Limiter
	// Clock, if set, gives the time (read to the millisecond) instead of the
	// wall clock (and of Redis's TIME with Deadlines). For tests. Keys then
	// live an hour longer than their last window, since Redis still expires
	// them by its own clock.
	Clock func() time.Time
	// Deadlines makes every check refuse to count when Redis runs it after
	// its caller's deadline, so a 503 never counts (docs/redis.md, "What a check counts"):
	// the scripts read Redis's clock (TIME) instead of the client's, and
	// fixed windows are counted by a script (fixed.lua) instead of plain
	// commands. It costs Redis 1.2 to 1.4 (the scripts) and 2.3 (fixed)
	// times as much CPU per check.
	Deadlines bool
	// MaxIDBytes is the longest id accepted. Default
	// 1024.
	MaxIDBytes int
	// DenyCache bounds the local cache of denials: how many ids' denials
	// are remembered, each answered without asking Redis until the time
	// Redis said it ends (a denied id keeps being denied until then
	// whatever other sidecars do, so nothing is allowed that Redis would
	// deny). Default 65,536; negative turns the cache off.
	DenyCache int
	// OnDegraded, if set, is called for every call Redis did not answer
	// (the circuit open, or Redis failing), with the fail mode that
	// answered it, the number of checks and why; the same callback as
	// client.Config.OnDegraded. Under FailClosed the checks also fail with
	// an error (the event then only counts them); under FailOpen and
	// FailLocal it is the only sign. It must be safe for concurrent use.
	OnDegraded func(rl.DegradedEvent)
	// OnCall, if set, is called after every call to Redis with the
	// operation ("check", "check_batch", "buckets", "reset", "ping"), how
	// long it took and its error (nil on success): the hook for latency and
	// error metrics. It must be quick and safe for concurrent use.
	OnCall func(op string, took time.Duration, err error)
	// OnCircuit, if set, is called when the circuit changes: open, with
	// why ("refused", "reset", "closed" (EOF), "loading", "clusterdown",
	// "masterdown", "tryagain", "readonly", "busy", "noreplicas", "oom"
	// (full, refusing writes), "misconf" (refusing writes after a failed
	// save), "no_answer", "not_connected" or "other"; the list may grow),
	// or closed again (reason "answered"). It must be quick and safe for
	// concurrent use.
	OnCircuit func(open bool, reason string)
	// OnLocalDenials, if set, is called with the number of checks of a
	// call that the cache of denials answered without Redis.
	OnLocalDenials func(n int)
	// Logger receives state changes. Default slog.Default().
	Logger *slog.Logger
}
