package memory_test

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// BenchmarkSweepPause holds 1,000,000 live buckets and measures the latency
// of checks made one after another while sweeps run over them, beside the
// same checks with no sweep. "live" sweeps examine every bucket and delete
// none, back to back until 20,000 checks were measured; "expired" sweeps
// delete all of them, refilling between sweeps, five times.
func BenchmarkSweepPause(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	probe := rl.Request{ID: "probe", Scale: time.Minute, Limit: 1 << 30, Hits: 1}
	fill := func(b *testing.B, l *memory.Limiter) {
		batch := make([]rl.Request, 0, 1000)
		for i := range n {
			batch = append(batch, rl.Request{ID: fmt.Sprintf("id-%013d", i), Scale: time.Second, Limit: 10, Hits: 1})
			if len(batch) == cap(batch) {
				if _, err := l.CheckRates(ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		// Let the runtime finish with the filling's garbage (GC, span
		// sweeping, returning memory to the OS) before timing anything.
		debug.FreeOSMemory()
	}
	// measure checks until stop is closed or max were made.
	measure := func(b *testing.B, l *memory.Limiter, stop <-chan struct{}, max int) []time.Duration {
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
	// during runs sweeps while measuring, rounds times.
	during := func(b *testing.B, l *memory.Limiter, clock *limitertest.Clock, expire bool, rounds, want int) (idle, lat []time.Duration, swept int) {
		for r := 0; r < rounds || len(lat) < want && !expire; r++ {
			if expire || r == 0 {
				fill(b, l)
			}
			if r == 0 {
				idle = measure(b, l, nil, 20_000)
			}
			if expire {
				clock.Advance(time.Second)
			}
			stop := make(chan struct{})
			go func() {
				defer close(stop)
				st, err := l.Sweep(ctx)
				if err != nil {
					b.Error(err)
				}
				swept += st.Examined
			}()
			lat = append(lat, measure(b, l, stop, 1<<30)...)
			<-stop
		}
		return idle, lat, swept
	}
	for _, mode := range []string{"live", "expired"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				clock := limitertest.NewClock(limitertest.T0)
				l := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, Shards: 1})
				idle, lat, swept := during(b, l, clock, mode == "expired", 5, 20_000)
				l.Close()
				if swept < n {
					b.Fatalf("swept %d of %d", swept, n)
				}
				b.ReportMetric(pct(lat, 99.9), "p99.9-sweep-µs")
				b.ReportMetric(pct(lat, 99), "p99-sweep-µs")
				b.ReportMetric(pct(lat, 50), "p50-sweep-µs")
				b.ReportMetric(pct(idle, 99.9), "p99.9-idle-µs")
				b.ReportMetric(float64(len(lat)), "checks-during-sweeps")
			}
		})
	}
}

func pct(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := min(len(s)-1, int(float64(len(s))*p/100))
	return float64(s[i].Nanoseconds()) / 1000
}
