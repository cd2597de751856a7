package nethttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/nethttp"
)

// TestMiddlewareWaitsItsTurn: with a leaky policy, requests that find room
// in the queue reach the handler at their turn, on the embedded limiter and
// through a sidecar; past Policy.MaxDelay, or a full queue, is a 429 at once, and
// a requester that leaves while waiting never reaches the handler.
func TestMiddlewareWaitsItsTurn(t *testing.T) {
	for name, lim := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			mw, err := nethttp.New(middleware.Config{Limiter: lim,
				Policy: rl.Request{Scale: time.Second, Limit: 5, Algo: rl.Leaky, Queue: 3, MaxDelay: 500 * time.Millisecond}}, nil)
			require.NoError(t, err)
			var mu sync.Mutex
			var reached []time.Duration
			start := time.Now()
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				reached = append(reached, time.Since(start))
				mu.Unlock()
			})
			h := mw(next)
			codes := make([]int, 4)
			var wg sync.WaitGroup
			for i := range codes {
				wg.Go(func() {
					req := httptest.NewRequest(http.MethodGet, "/", nil)
					req.RemoteAddr = "192.0.2.1:1000"
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					codes[i] = w.Code
				})
			}
			wg.Wait()
			slices.Sort(codes)
			// The limiter's clock stands still: turns at 0, 200 and 400
			// ms; the fourth would wait 600 ms, past Policy.MaxDelay.
			assert.Equal(t, []int{200, 200, 200, 429}, codes)
			require.Len(t, reached, 3)
			slices.Sort(reached)
			for i, at := range reached {
				want := time.Duration(200*i) * time.Millisecond
				assert.GreaterOrEqual(t, at, want, "reached the handler at its turn")
				// Only an answer held far past its turn crosses this;
				// the turns' spacing is in the delays, exactly.
				assert.Less(t, at, want+10*time.Second)
			}

			// A requester that leaves while it waits: the handler never
			// runs. Its turn is 12 s away (five a minute), so that the
			// requester leaving after 50 ms is never beaten by its turn,
			// however late a busy machine runs the timer that leaves.
			slow, err := nethttp.New(middleware.Config{Limiter: lim,
				Policy: rl.Request{Scale: time.Minute, Limit: 5, Algo: rl.Leaky, Queue: 3, MaxDelay: 30 * time.Second}}, nil)
			require.NoError(t, err)
			hs := slow(next)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
			req.RemoteAddr = "192.0.2.2:1000"
			for range 2 { // the second waits 12 s
				if ctx.Err() == nil {
					time.AfterFunc(50*time.Millisecond, cancel)
				}
				hs.ServeHTTP(httptest.NewRecorder(), req)
			}
			assert.Len(t, reached, 4, "only the first of the two reached it")
		})
	}
}
