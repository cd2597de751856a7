package redisbackend_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestDeniedFloodStaysLocal floods one hot key, denied after its first ten
// hits, from two backends (two sidecars) on one Redis: exactly the limit is
// allowed across both, and Redis sees at most 1 % of the checks, the rest
// being answered by each backend's cache of denials. For every algorithm;
// Redis's own command statistics count what reached it.
func TestDeniedFloodStaysLocal(t *testing.T) {
	srv := redistest.Start(t)
	const limit, checks = 10, 20_000
	for _, a := range check.Algos {
		t.Run(a.String(), func(t *testing.T) {
			var local atomic.Int64
			var bs []*redisbackend.Backend
			for range 2 {
				b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Prefix: "flood", Timeout: 5 * time.Second,
					OnLocalDenials: func(n int) { local.Add(int64(n)) }})
				require.NoError(t, err)
				t.Cleanup(func() { b.Close() })
				bs = append(bs, b)
			}
			_, err := srv.Do("CONFIG", "RESETSTAT")
			require.NoError(t, err)
			// A minute's window: a token refills one hit every 6 s (a
			// leaky bucket's queue lets one leave), which the flood does
			// not last.
			r := rl.Request{ID: "hot-" + a.String(), Scale: time.Minute, Limit: limit, Hits: 1, Algo: a}
			if a == rl.Leaky {
				r.Queue = limit - 1 // the limit at once, all but one waiting
			}
			var allowed, denied atomic.Int64
			var wg sync.WaitGroup
			const workers = 8
			for w := range workers {
				wg.Go(func() {
					b := bs[w%2]
					for range checks / workers {
						d, err := b.CheckRate(context.Background(), r)
						if !assert.NoError(t, err) {
							return
						}
						if d.Allowed {
							allowed.Add(1)
						} else {
							denied.Add(1)
						}
					}
				})
			}
			wg.Wait()
			info, err := srv.CLI("INFO", "commandstats")
			require.NoError(t, err)
			var commands int64
			for _, m := range regexp.MustCompile(`cmdstat_(set|incrby|evalsha|eval):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
				n, _ := strconv.ParseInt(m[2], 10, 64)
				commands += n
			}
			t.Logf("%d allowed, %d denied, %d of them by the caches; %d commands reached Redis", allowed.Load(), denied.Load(), local.Load(), commands)
			assert.Equal(t, int64(limit), allowed.Load(), "exactly the limit, across both")
			assert.LessOrEqual(t, commands, int64(checks/100), "Redis sees at most 1%% of the checks")
		})
	}
}
