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
	// (docs/perf-notes.md has the measurements).
	BatchInFlight = 1
)

// The Redis backend (redisbackend.Config).
const (
	// RedisTimeout is Config.Timeout's zero value: no ceiling of the
	// backend's own; a call waits for Redis as long as its caller's
	// deadline allows (the sidecar's -timeout, 1 s by default).
	RedisTimeout = 0
	// DenyCache is how many ids' denials the local cache keeps
	// (Config.DenyCache): a few hundred bytes each.
	DenyCache = 65536
)
