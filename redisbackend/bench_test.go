package redisbackend_test

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// BenchURLEnv names a Redis the benchmarks use instead of starting their
// own: lab/scripts/redis-bench.sh sets it, to put redis-benchmark on the same
// server in the same run.
const BenchURLEnv = "REDISBACKEND_BENCH_URL"

func benchURL(b *testing.B) string {
	if u := os.Getenv(BenchURLEnv); u != "" {
		return u
	}
	return redistest.Start(b).URL()
}

// benchIDs is the number of distinct ids the benchmarks spread over.
const benchIDs = 10_000

// runChecks runs the benchmark's loop from parallelism goroutines per
// GOMAXPROCS. Each goroutine gets its own step from newStep (room for its
// buffers); each call of a step makes per checks, numbered from first on a
// counter shared by all, and the whole run's checks per second are
// reported.
func runChecks(b *testing.B, parallelism int, per int64, newStep func() func(ctx context.Context, first int64) error) {
	var n atomic.Int64
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		step := newStep()
		for pb.Next() {
			if err := step(ctx, n.Add(per)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "checks/s")
}

// BenchmarkBackend measures the backend itself: CheckRate from many
// goroutines (as a sidecar's concurrent requests), and CheckRates with
// batches of 100 (as the batch endpoint), on ids spread over benchIDs.
func BenchmarkBackend(b *testing.B) {
	url := benchURL(b)
	be, err := redisbackend.New(redisbackend.Config{URL: url, Prefix: "benchbe", Timeout: time.Second})
	require.NoError(b, err)
	defer be.Close()
	req := func(i int64) rl.Request {
		return rl.Request{ID: "id" + strconv.FormatInt(i%benchIDs, 10), Scale: time.Minute, Limit: 1_000_000, Hits: 1}
	}
	b.Run("CheckRate", func(b *testing.B) {
		runChecks(b, 16, 1, func() func(context.Context, int64) error {
			return func(ctx context.Context, i int64) error {
				_, err := be.CheckRate(ctx, req(i))
				return err
			}
		})
	})
	b.Run("CheckRates100", func(b *testing.B) {
		runChecks(b, 2, 100, batchStep(100, req, be.CheckRates))
	})
}

// SidecarEnv names a running sidecar (host:port) on the benchmark's Redis:
// lab/scripts/redis-bench.sh starts one and sets it.
const SidecarEnv = "REDISBACKEND_BENCH_SIDECAR"

// BenchmarkSidecarBatch sends batches of 100 checks through the Go client's
// batch call (POST /check_rates) to the sidecar of REDISBACKEND_BENCH_SIDECAR,
// which decides them on Redis with one pipelined CheckRates. Skipped without
// that sidecar.
func BenchmarkSidecarBatch(b *testing.B) {
	addr := os.Getenv(SidecarEnv)
	if addr == "" {
		b.Skip(SidecarEnv + " not set: lab/scripts/redis-bench.sh starts a sidecar on Redis for this benchmark")
	}
	c, err := client.New(client.Config{URL: "http://" + addr, Timeout: 5 * time.Second})
	require.NoError(b, err)
	defer c.Close()
	req := func(i int64) rl.Request {
		return rl.Request{ID: "sc" + strconv.FormatInt(i%benchIDs, 10), Scale: time.Minute, Limit: 1_000_000_000, Hits: 1}
	}
	runChecks(b, 4, 100, batchStep(100, req, c.CheckRates))
}

// BenchmarkPipelinedCounter is the baseline of BenchmarkSidecarBatch: what a
// fixed window costs at the least, INCRBY and PEXPIRE per check, pipelined
// through rueidis in batches of 100 checks (200 commands) from as many
// goroutines, on the same Redis, with no HTTP and no decision. A check that
// reaches its throughput is bound by Redis alone.
func BenchmarkPipelinedCounter(b *testing.B) {
	opt, err := rueidis.ParseURL(benchURL(b))
	require.NoError(b, err)
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	require.NoError(b, err)
	defer c.Close()
	runChecks(b, 4, 100, func() func(context.Context, int64) error {
		cmds := make(rueidis.Commands, 0, 200)
		return func(ctx context.Context, first int64) error {
			cmds = cmds[:0]
			for i := range int64(100) {
				k := "pc:{" + strconv.FormatInt((first+i)%benchIDs, 10) + "}"
				cmds = append(cmds, c.B().Incrby().Key(k).Increment(1).Build(), c.B().Pexpire().Key(k).Milliseconds(60_000).Build())
			}
			for _, r := range c.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					return err
				}
			}
			return nil
		}
	})
}

// batchStep makes runChecks steps that send batches of n checks req(first),
// req(first+1), ... through checkRates, each goroutine in a buffer of its
// own.
func batchStep(n int, req func(int64) rl.Request, checkRates func(context.Context, []rl.Request) ([]rl.Decision, error)) func() func(context.Context, int64) error {
	return func() func(context.Context, int64) error {
		rs := make([]rl.Request, n)
		return func(ctx context.Context, first int64) error {
			for i := range rs {
				rs[i] = req(first + int64(i))
			}
			_, err := checkRates(ctx, rs)
			return err
		}
	}
}

// BenchmarkAdmission sizes the bound on calls in flight: single checks
// from 4,096 goroutines (a busy sidecar's handlers), each with the
// sidecar's 1 s deadline, at several MaxInFlight. Reports checks per
// second and the p99 of one check's latency.
func BenchmarkAdmission(b *testing.B) {
	url := benchURL(b)
	for _, inFlight := range []int{16, 64, 256, 512, 4096} {
		b.Run("inflight="+strconv.Itoa(inFlight), func(b *testing.B) {
			be, err := redisbackend.New(redisbackend.Config{URL: url, Prefix: "benchadm", MaxInFlight: inFlight})
			require.NoError(b, err)
			defer be.Close()
			var n atomic.Int64
			lat := make(chan []time.Duration, 8192)
			b.SetParallelism(4096 / max(1, runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					i := n.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					t := time.Now()
					_, err := be.CheckRate(ctx, rl.Request{ID: "id" + strconv.FormatInt(i%benchIDs, 10), Scale: time.Minute, Limit: 1_000_000, Hits: 1})
					mine = append(mine, time.Since(t))
					cancel()
					if err != nil {
						b.Error(err)
						return
					}
				}
				lat <- mine
			})
			elapsed := time.Since(start)
			close(lat)
			var all []time.Duration
			for l := range lat {
				all = append(all, l...)
			}
			slices.Sort(all)
			b.ReportMetric(float64(n.Load())/elapsed.Seconds(), "checks/s")
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
