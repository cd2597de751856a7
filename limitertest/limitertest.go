// Package limitertest is the shared semantics table every raterlimiter
// backend must pass: the embedded limiter, the sidecar's client and the Redis
// backend run the same cases through the raterlimiter.Limiter interface.
package limitertest

import (
	"sync/atomic"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
)

// Clock is a settable clock in Unix milliseconds, safe for concurrent use.
type Clock struct{ ms atomic.Int64 }

// NewClock returns a clock that reads ms.
func NewClock(ms int64) *Clock {
	c := &Clock{}
	c.ms.Store(ms)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() int64 { return c.ms.Load() }

// Set sets the clock's time.
func (c *Clock) Set(ms int64) { c.ms.Store(ms) }

// Advance moves the clock by d milliseconds.
func (c *Clock) Advance(d int64) { c.ms.Add(d) }

// Factory returns a fresh, empty limiter that reads its time from clock.Now
// and registers its own cleanup with t.Cleanup.
type Factory func(t *testing.T, clock *Clock) rl.Limiter

// Run runs every case of the table against limiters made by f, one limiter
// per case.
func Run(t *testing.T, f Factory) {
	t.Helper()
	var all []Case
	all = append(all, fixedCases()...)
	all = append(all, slidingCases()...)
	all = append(all, tokenCases()...)
	all = append(all, logCases()...)
	all = append(all, slicesCases()...)
	all = append(all, leakyCases()...)
	all = append(all, commonCases()...)
	for _, c := range all {
		t.Run(c.Name, func(t *testing.T) {
			clock := NewClock(c.Start)
			l := f(t, clock)
			c.run(t, l, clock)
		})
	}
}
