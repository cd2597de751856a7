package memory_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// BenchmarkSweepPause fills 1,000,000 live buckets, then measures the
// latency of checks made one after another while a sweep runs over them,
// beside the same checks with no sweep. "expired" sweeps delete every
// bucket; "live" sweeps examine them all and delete none.
func BenchmarkSweepPause(b *testing.B) {
	const n = 1_000_000
	for _, mode := range []string{"expired", "live"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				clock := limitertest.NewClock(limitertest.T0)
				l := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
				ctx := context.Background()
				batch := make([]rl.Request, 0, 1000)
				for i := range n {
					batch = append(batch, rl.Request{ID: fmt.Sprintf("id-%013d", i), Scale: 1000, Limit: 10, Hits: 1})
					if len(batch) == cap(batch) {
						if _, err := l.CheckRates(ctx, batch); err != nil {
							b.Fatal(err)
						}
						batch = batch[:0]
					}
				}
				if mode == "expired" {
					clock.Advance(1000)
				}
				probe := rl.Request{ID: "probe", Scale: 60_000, Limit: 1 << 30, Hits: 1}
				measure := func(stop <-chan struct{}, max int) []time.Duration {
					var lat []time.Duration
					for len(lat) < max {
						select {
						case <-stop:
							return lat
						default:
						}
						start := time.Now()
						if _, err := l.CheckRate(ctx, probe); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(start))
					}
					return lat
				}
				idle := measure(nil, 20_000)
				stop := make(chan struct{})
				var st memoryStats
				go func() {
					s, err := l.Sweep(ctx)
					if err != nil {
						b.Error(err)
					}
					st = memoryStats{s.Examined, s.Deleted}
					close(stop)
				}()
				during := measure(stop, 1<<30)
				<-stop
				l.Close()
				if st.examined < n {
					b.Fatalf("swept %d of %d", st.examined, n)
				}
				b.ReportMetric(pct(during, 99.9), "p99.9-sweep-µs")
				b.ReportMetric(pct(during, 99), "p99-sweep-µs")
				b.ReportMetric(pct(idle, 99.9), "p99.9-idle-µs")
				b.ReportMetric(float64(len(during)), "checks-during-sweep")
				b.ReportMetric(float64(st.deleted), "deleted")
			}
		})
	}
}

type memoryStats struct{ examined, deleted int }

func pct(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := min(len(s)-1, int(float64(len(s))*p/100))
	return float64(s[i].Nanoseconds()) / 1000
}
