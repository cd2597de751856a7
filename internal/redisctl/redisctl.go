// Package redisctl is the Redis backend's plumbing for the sidecar and the
// tests, kept off package redisbackend's public surface: the options of
// its circuit breaker, admission and cache of denials that only an
// operator's flags set, the hooks that feed the sidecar's metrics, the
// health check (Ping, Up), the reason a circuit changed (for metric
// labels) and the check of a -redis-url flag.
//
// Package redisbackend registers its implementation when it is linked in
// (New, Of, Reason); a program that calls them imports redisbackend too.
package redisctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Options are what a redisbackend.Config leaves to the sidecar. Every zero
// field means the default its comment names, as redisbackend.New uses.
type Options struct {
	// OnCall, if set, is called after every call to Redis with the
	// operation ("check", "check_batch", "buckets", "reset", "ping"), how
	// long it took and its error (nil on success): the hook for latency
	// and error metrics.
	OnCall func(op string, d time.Duration, err error)
	// OnState, if set, is called when the circuit changes: up is false
	// when it opens (Redis failing; Reason names why), true when Redis
	// answers again.
	OnState func(up bool, err error)
	// OnLocalDenials, if set, is called with the number of requests of a
	// call that the cache of denials answered without Redis.
	OnLocalDenials func(n int)
	// StartDown lets New succeed while Redis cannot be reached: the
	// backend starts with the circuit open (answering by its fail mode)
	// and connects in the background, trying every ProbeInterval. Without
	// it New fails.
	StartDown bool
	// DenyCache bounds the local cache of denials: how many ids' denials
	// are kept, each answered without Redis until the time Redis said it
	// ends. Default 65,536 (internal/defaults.DenyCache); negative turns
	// it off.
	DenyCache int
	// ProbeInterval is how often an open circuit lets one call try Redis.
	// Default 100 ms.
	ProbeInterval time.Duration
	// MaxQueued bounds the calls waiting for a turn among
	// redisbackend.Config.MaxInFlight; beyond it a call is shed at once
	// (an error matching raterlimiter.ErrUnavailable, nothing counted).
	// Default 8,192.
	MaxQueued int
}

// Backend is what a *redisbackend.Backend offers beyond its public
// methods.
type Backend interface {
	// Ping asks Redis for PING and for a write that changes nothing,
	// whatever the circuit's state: a Redis that answers reads but
	// refuses writes (full at maxmemory with noeviction, or after a
	// failed save) cannot count a check, and is unavailable as one that
	// does not answer. A success closes the circuit; Redis unavailable or
	// refusing writes opens it (an error matching
	// raterlimiter.ErrUnavailable). For health checks.
	Ping(ctx context.Context) error
	// Up reports whether the circuit is closed: Redis answered the last
	// call that asked it.
	Up() bool
}

// ErrCircuitOpen is the cause given while the circuit is open: Redis
// failed recently and was not asked. The unavailable error of such a
// check (and a DegradedEvent's Err) matches it.
var ErrCircuitOpen = errors.New("redisbackend: circuit open, redis not asked")

var (
	newBackend any // func(redisbackend.Config, Options) (*redisbackend.Backend, error)
	of         func(any) (Backend, bool)
	reason     func(error) string
)

// Register is called by package redisbackend when it is initialized:
// newFn is New with Options, view returns a backend's plumbing, and why
// is Reason.
func Register[C, B any](newFn func(C, Options) (B, error), view func(any) (Backend, bool), why func(error) string) {
	newBackend, of, reason = newFn, view, why
}

// New is redisbackend.New with the options o: C is redisbackend.Config and
// B *redisbackend.Backend, as in New[*redisbackend.Backend](cfg, o). It
// panics when package redisbackend is not linked in or the types are not
// those.
func New[B, C any](cfg C, o Options) (B, error) {
	fn, ok := newBackend.(func(C, Options) (B, error))
	if !ok {
		var b B
		panic(fmt.Sprintf("redisctl: New[%T](%T) is not redisbackend's New, or redisbackend is not linked in", b, cfg))
	}
	return fn(cfg, o)
}

// Of returns the plumbing of l, a *redisbackend.Backend (or the sidecar's
// view of one, degrade.Strict), or false when l is something else.
func Of(l any) (Backend, bool) {
	if of == nil {
		return nil, false
	}
	return of(l)
}

// MustOf is Of for a caller that holds a *redisbackend.Backend.
func MustOf(l any) Backend {
	b, ok := Of(l)
	if !ok {
		panic(fmt.Sprintf("redisctl: %T is not a Redis backend", l))
	}
	return b
}

// Reason names why the circuit changed, for logs and metrics: "answered"
// (err nil), "refused", "reset", "closed" (EOF), "loading",
// "clusterdown", "masterdown", "tryagain", "readonly", "busy",
// "noreplicas", "oom" (full, refusing writes), "misconf" (refusing writes
// after a failed save), "no_answer", "not_connected", or "other". The list
// may gain a reason in any release.
func Reason(err error) string {
	if reason == nil {
		return "other"
	}
	return reason(err)
}

// CheckURL reports whether redisbackend.New would accept url as
// Config.URL: a redis://, rediss:// or unix:// URL that parses. It does
// not connect, so the sidecar can refuse a malformed -redis-url before it
// tries Redis.
func CheckURL(url string) error {
	_, err := rueidis.ParseURL(url)
	return err
}
