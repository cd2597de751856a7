package fasthttpmw_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/middleware"
)

// TestMiddlewareWaitsItsTurn: a request the leaky queue admits with a
// delay reaches the handler after it; past Policy.MaxDelay it is a 429 at once.
func TestMiddlewareWaitsItsTurn(t *testing.T) {
	for name, lim := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			h := newMW(t, middleware.Config{Limiter: lim,
				Policy: rl.Request{Scale: time.Second, Limit: 5, Algo: rl.Leaky, Queue: 3, MaxDelay: 300 * time.Millisecond}}, nil)
			for i, want := range []time.Duration{0, 200 * time.Millisecond} {
				start := time.Now()
				resp, reached := serve(t, h, "192.0.2.1:1000", nil)
				took := time.Since(start)
				assert.Equal(t, 200, resp.StatusCode(), "request %d", i)
				assert.True(t, reached)
				assert.GreaterOrEqual(t, took, want)
				// Only an answer held far past its turn crosses this.
				assert.Less(t, took, want+10*time.Second)
			}
			start := time.Now()
			resp, reached := serve(t, h, "192.0.2.1:1000", nil)
			assert.Equal(t, 429, resp.StatusCode(), "400 ms is past Policy.MaxDelay")
			assert.False(t, reached)
			assert.Less(t, time.Since(start), 10*time.Second, "refused, not left waiting (a bound only a hang crosses)")
		})
	}
}
