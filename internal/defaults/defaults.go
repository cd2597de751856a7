// Package defaults holds the defaults of the public packages' Config
// fields that the sidecar and its tools show as their flags' defaults.
// Each Config documents its own; these are the same numbers, named once.
package defaults

import "time"

// The memory backend (memory.Config).
const (
	// MaxBuckets is Config.MaxBuckets's default: with ids of 16 bytes its
	// records take about 256 MB (64 bytes a record), so it binds before
	// MaxBucketBytes; with longer ids the byte budget binds first.
	MaxBuckets = 4_000_000
	// MaxBucketBytes is Config.MaxBucketBytes's default, 256 MiB: the most
	// the records take whatever their ids (about 256,000 records of
	// 1,000-byte ids).
	MaxBucketBytes = 256 << 20
	// MaxScalesPerID is Config.MaxScalesPerID's default: far more than any
	// real use (a per-second, -minute, -hour and -day limit per
	// algorithm), and a bound on what one id can be made to hold.
	MaxScalesPerID = 64
)

// The sidecar's client (client.Config).
const (
	// ClientTimeout bounds every call that has no earlier deadline.
	ClientTimeout = time.Second
	// ClientMaxConnsPerHost is how many connections the client keeps open
	// to the sidecar (idle ones included).
	ClientMaxConnsPerHost = 256
	// BatchMaxSize is the most checks one batch carries; it must not
	// exceed the sidecar's -max-batch (1000 by default).
	BatchMaxSize = 500
	// BatchInFlight is how many batches may be on their way at once: one,
	// since the checks that arrive while a batch travels make the next
	// one, so batches grow with the load without a window to wait out
	// (lab/notes/perf-notes.md has the measurements).
	BatchInFlight = 1
)

// The Redis backend (redisbackend.Config).
const (
	// RedisTimeout is Config.Timeout's zero value: no ceiling of the
	// backend's own; a call waits for Redis as long as its caller's
	// deadline allows (the sidecar's -timeout, 1 s by default).
	RedisTimeout = 0
	// DenyCache is how many ids' denials the local cache keeps
	// (redisctl.Options.DenyCache, -redis-deny-cache): a few hundred bytes
	// each.
	DenyCache = 65536
)

// The sidecar's HTTP server (api.Config).
const (
	// Timeout is Config.Timeout's default: the wait for the
	// limiter's answer.
	Timeout = time.Second
	// MaxBatch is Config.MaxBatch's default: the most checks in one
	// POST /check_rates.
	MaxBatch = 1000
	// ReadTimeout is Config.ReadTimeout's default: reading one
	// request.
	ReadTimeout = 10 * time.Second
	// WriteTimeout is Config.WriteTimeout's default: writing one
	// response.
	WriteTimeout = 10 * time.Second
	// IdleTimeout is Config.IdleTimeout's default: a keep-alive
	// connection's idle time.
	IdleTimeout = 60 * time.Second
	// Concurrency is Config.Concurrency's default: the connections
	// served at once.
	Concurrency = 16384
	// ReadBufferSize bounds a request's line and headers: enough
	// for what nginx passes to /auth, every header its default
	// large_client_header_buffers (4 × 8 KiB) accepts from a client and
	// those it sets itself, so that a client's big headers are read and
	// decided, never an error nginx turns into a 500; and for an id of
	// 1024 bytes, each percent-encoded.
	ReadBufferSize = 48 << 10
	// BucketsPage is Config.BucketsPage's default: the records one
	// GET /buckets answers without a limit.
	BucketsPage = 1000
	// MaxConnsPerIP is the most connections one client address may
	// hold: a sixteenth of Concurrency, so one client cannot take
	// the server from the others.
	MaxConnsPerIP = 1024
	// MaxConnsPerProxy is the most connections one trusted proxy
	// may hold: it carries many clients.
	MaxConnsPerProxy = 8192
	// FirstByteTimeout is how long a new connection may stay silent
	// before its first request begins.
	FirstByteTimeout = 2 * time.Second
	// BodyBudget bounds the request bytes read and not yet answered,
	// over every connection: what clients that send bodies slowly, or never
	// finish them, can make the server hold.
	BodyBudget = 32 << 20
	// DashboardInterval is how often the dashboard samples the rates.
	DashboardInterval = time.Second
	// MaxWait bounds how long the sidecar holds an answer (wait=1, a
	// policy's wait: true) when Config.MaxWait is 0.
	MaxWait = 10 * time.Second
	// MaxHeld is Config.MaxHeld's default: half of
	// DefaultMaxConnsPerIP, the bound on a proxy's connections when it is
	// not in -trusted-proxies.
	MaxHeld = 512
	// MaxHeldPerClient is Config.MaxHeldPerClient's default.
	MaxHeldPerClient = 32
)
