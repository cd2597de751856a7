package memory_test

import (
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

func TestSemantics(t *testing.T) {
	for _, shards := range []int{1, 3} {
		limitertest.Run(t, func(t *testing.T, clock *limitertest.Clock) rl.Limiter {
			l := memory.New(memory.Config{Shards: shards, Clock: clock.Now, SweepInterval: -1})
			t.Cleanup(func() { l.Close() })
			return l
		})
	}
}
