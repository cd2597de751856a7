package redisbackend_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestCombinedChecksReachTheirCallers: concurrent single checks are sent in
// groups (one DoMulti per group); each caller must get its own answer. Every
// goroutine checks an id of its own again and again, so an answer handed to
// the wrong caller shows as a count out of sequence.
func TestCombinedChecksReachTheirCallers(t *testing.T) {
	srv := redistest.Start(t)
	b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Prefix: "comb"})
	require.NoError(t, err)
	defer b.Close()
	const callers, each = 200, 25
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			// Ten years: no window ends while the test runs (an hour's
			// ends at every full hour, a reset mid-sequence).
			r := rl.Request{ID: "caller-" + strconv.Itoa(g), Scale: 87600 * time.Hour, Limit: 1000, Hits: int64(1 + g%3)}
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				d, err := b.CheckRate(ctx, r)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, int64(i+1)*r.Hits, d.Count, "caller %d, check %d: another caller's answer", g, i)
			}
		})
	}
	wg.Wait()
}
