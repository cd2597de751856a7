package redisbackend_test

import (
	"context"
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

// TestTwoBackendsShareOneLimit plays two sidecars on one Redis, and on a
// three-master cluster: two backends, each with its own connections and
// Redis's clock, are hit concurrently on the same ids; exactly limit hits are
// allowed, for every algorithm, by single checks and by batches.
func TestTwoBackendsShareOneLimit(t *testing.T) {
	const limit = 100
	srv := redistest.Start(t)
	cluster := startCluster(t)
	for _, target := range []struct{ name, url string }{
		{"single", srv.URL()},
		{"cluster", cluster.URL()},
	} {
		t.Run(target.name, func(t *testing.T) {
			var bs []*redisbackend.Backend
			for range 2 {
				b, err := redisbackend.New(redisbackend.Config{URL: target.url, Timeout: 5 * time.Second})
				require.NoError(t, err)
				t.Cleanup(func() { b.Close() })
				bs = append(bs, b)
			}
			for _, a := range check.Algos {
				for _, batch := range []bool{false, true} {
					name := a.String() + "/single"
					if batch {
						name = a.String() + "/batch"
					}
					t.Run(name, func(t *testing.T) {
						// A ten-year window: no window starts, and GCRA
						// refills one hit per 36 days, while the test runs.
						id := target.name + "/" + name + "/" + time.Now().Format(time.RFC3339Nano)
						r := rl.Request{ID: id, Scale: check.MaxScale, Limit: limit, Hits: 1, Algo: a}
						if a == rl.Leaky {
							r.Queue = limit - 1 // the limit at once, all but one waiting
						}
						var allowed, denied atomic.Int64
						var wg sync.WaitGroup
						const workers, perWorker = 8, 3 * limit / 8
						for w := range workers {
							b := bs[w%2]
							wg.Go(func() {
								ctx := context.Background()
								for i := 0; i < perWorker; {
									var ds []rl.Decision
									if batch {
										rs := []rl.Request{r, r, r}
										var err error
										ds, err = b.CheckRates(ctx, rs)
										if !assert.NoError(t, err) {
											return
										}
									} else {
										d, err := b.CheckRate(ctx, r)
										if !assert.NoError(t, err) {
											return
										}
										ds = []rl.Decision{d}
									}
									for _, d := range ds {
										if d.Allowed {
											allowed.Add(1)
										} else {
											denied.Add(1)
										}
									}
									i += len(ds)
								}
							})
						}
						wg.Wait()
						assert.Equal(t, int64(limit), allowed.Load(), "allowed across both backends")
						assert.GreaterOrEqual(t, denied.Load(), int64(2*limit-8), "the rest denied")
						peek := r
						peek.Hits, peek.Peek = 0, true
						d, err := bs[0].CheckRate(context.Background(), peek)
						require.NoError(t, err)
						assert.Equal(t, int64(0), d.Remaining)
					})
				}
			}
		})
	}
}
