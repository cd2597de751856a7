package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// jumpyClocks is a wall clock that the test steps both ways and a monotonic
// clock that only advance moves, safe for concurrent use.
type jumpyClocks struct {
	mu   sync.Mutex
	wall int64
	mono time.Duration
}

func (c *jumpyClocks) Wall() int64 { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }
func (c *jumpyClocks) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}
func (c *jumpyClocks) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono += d
	c.wall += d.Milliseconds()
}
func (c *jumpyClocks) jump(ms int64) { c.mu.Lock(); defer c.mu.Unlock(); c.wall += ms }

// TestCorrectedClockJumpsNeitherFreezeNorRewind: with a limit of 2 per
// second, a wall clock that jumps an hour forward (then back) or an hour
// back (then forward) changes no decision: every two seconds of monotonic time
// open a fresh window with exactly 2 hits allowed, during and after the jump.
func TestCorrectedClockJumpsNeitherFreezeNorRewind(t *testing.T) {
	for _, dir := range []int64{+1, -1} {
		for _, a := range check.Algos {
			t.Run(a.String(), func(t *testing.T) {
				c := &jumpyClocks{wall: limitertest.T0.UnixMilli()}
				steady := actor.NewSteadyClock(c.Wall, c.Mono)
				l := memory.New(memory.Config{Shards: 1, Clock: func() time.Time { return time.UnixMilli(steady.Now()) }, SweepInterval: -1})
				defer l.Close()
				r := rl.Request{ID: "u", Scale: time.Second, Limit: 2, Hits: 1, Algo: a}
				if a == rl.Leaky {
					r.Queue = 1
				}
				for step := range 8 {
					switch step {
					case 2:
						c.jump(dir * 3_600_000)
					case 5:
						c.jump(-dir * 3_600_000)
					}
					allowed := 0
					for range 5 {
						d, err := l.CheckRate(context.Background(), r)
						require.NoError(t, err)
						if d.Allowed {
							allowed++
						}
					}
					require.Equal(t, 2, allowed, "step %d (jump %+d h at 2, corrected at 5)", step, dir)
					c.advance(2 * time.Second) // past the previous window too (sliding)
				}
			})
		}
	}
}
