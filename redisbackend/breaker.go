package redisbackend

import (
	"sync/atomic"
	"time"
)

// breaker is a circuit breaker with one probe per interval. Closed (Redis
// answering), every call goes to Redis. The first call that finds Redis
// unavailable opens it; while open, calls do not go to Redis, except one per
// interval (the probe). A success closes it. Safe for concurrent use.
type breaker struct {
	interval time.Duration
	open     atomic.Bool
	next     atomic.Int64 // UnixNano after which the next probe may go
	now      func() time.Time
}

// allow reports whether a call may go to Redis.
func (b *breaker) allow() bool {
	if !b.open.Load() {
		return true
	}
	t := b.now().UnixNano()
	n := b.next.Load()
	return t >= n && b.next.CompareAndSwap(n, t+int64(b.interval))
}

// success records an answer from Redis; it reports whether the circuit was
// open (and is now closed).
func (b *breaker) success() bool {
	return b.open.Load() && b.open.CompareAndSwap(true, false)
}

// failure records Redis unavailable: the next probe may go an interval
// from now, whether the circuit was closed or a probe just failed (a probe
// that waited its caller's deadline must not make the next caller a probe
// too). It reports whether the circuit was closed (and is now open).
func (b *breaker) failure() bool {
	b.next.Store(b.now().Add(b.interval).UnixNano())
	return !b.open.Load() && b.open.CompareAndSwap(false, true)
}

// up reports whether the circuit is closed.
func (b *breaker) up() bool { return !b.open.Load() }
