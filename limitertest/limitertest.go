// Package limitertest is the shared semantics table every raterlimiter
// backend must pass: the embedded limiter, the sidecar's client and the Redis
// backend run the same cases through the raterlimiter.Limiter interface.
package limitertest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	rl "github.com/raterlimiter/raterlimiter"
)

// Clock is a settable clock, safe for concurrent use. Its Now is what a
// backend's Config.Clock takes.
type Clock struct{ ms atomic.Int64 }

// NewClock returns a clock that reads t, to the millisecond.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.ms.Store(t.UnixMilli())
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Set sets the clock's time, to the millisecond.
func (c *Clock) Set(t time.Time) { c.ms.Store(t.UnixMilli()) }

// Advance moves the clock by d, to the millisecond.
func (c *Clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// T0 is the time most cases start at: a whole number of seconds and
// minutes, so windows of a second and of a minute begin there.
var T0 = time.UnixMilli(t0)

// Factory returns a fresh, empty limiter that reads its time from clock.Now
// and registers its own cleanup with t.Cleanup.
type Factory func(t *testing.T, clock *Clock) rl.Limiter

// Run runs every case of the table against limiters made by f, one limiter
// per case.
func Run(t *testing.T, f Factory) {
	t.Helper()
	all := slices.Concat(fixedCases(), slidingCases(), tokenCases(), logCases(), slicesCases(), leakyCases(), commonCases())
	for _, c := range all {
		t.Run(c.Name, func(t *testing.T) {
			clock := NewClock(time.UnixMilli(c.Start))
			l := f(t, clock)
			c.run(t, l, clock)
		})
	}
	runWait(t, f)
}

// Concurrent checks r on c from goroutines goroutines at once, times
// checks each, and returns how many were allowed and how many denied; a
// check that fails is an error of t. With fewer than goroutines×times hits
// allowed per window, and a window that does not end meanwhile, a limiter
// that decides atomically allows exactly its limit.
func Concurrent(t testing.TB, c rl.Limiter, r rl.Request, goroutines, times int) (allowed, denied int64) {
	t.Helper()
	var a, d atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range times {
				dec, err := c.CheckRate(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				if dec.Allowed {
					a.Add(1)
				} else {
					d.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return a.Load(), d.Load()
}
