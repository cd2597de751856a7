package snapshot_test

import (
	"context"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/snapshot"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// fill gives l n records, a third of each algorithm.
func fill(b *testing.B, l *memory.Limiter, n int) {
	b.Helper()
	batch := make([]rl.Request, 0, 1000)
	for i := range n {
		batch = append(batch, rl.Request{ID: "user:" + strconv.Itoa(i), Scale: time.Hour, Limit: 100, Hits: 1, Algo: rl.Algo(i % 3)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := l.CheckRates(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// checker runs checks on l until stop and returns their latencies.
func checker(l *memory.Limiter, stop <-chan struct{}) <-chan []time.Duration {
	out := make(chan []time.Duration, 1)
	go func() {
		var lat []time.Duration
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				out <- lat
				return
			default:
			}
			t0 := time.Now()
			_, _ = l.CheckRate(ctx, rl.Request{ID: "hot" + strconv.Itoa(i%64), Scale: time.Minute, Limit: 1 << 30, Hits: 1})
			lat = append(lat, time.Since(t0))
		}
	}()
	return out
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-check-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-check-ms")
}

// BenchmarkWrite1M writes a snapshot of one shard holding 1,000,000 records
// while a goroutine keeps checking on that shard, and reports how long the
// checks waited. Baselines in the same run: "idle" runs the checker with no
// write, "one-visit" copies the whole shard in a single visit, "scan-only"
// is one visit that scans the tree and does nothing else (the floor of any
// visit that must find its place with Scan).
func BenchmarkWrite1M(b *testing.B) {
	clock := limitertest.NewClock(limitertest.T0)
	l := memory.New(memory.Config{Shards: 1, Clock: clock.Now, SweepInterval: -1})
	defer l.Close()
	fill(b, l, 1_000_000)
	dir := b.TempDir()
	var once sync.Once
	b.Run("idle", func(b *testing.B) {
		stop := make(chan struct{})
		lat := checker(l, stop)
		for b.Loop() {
			time.Sleep(50 * time.Millisecond) // a stand-in for a write's duration
		}
		close(stop)
		report(b, <-lat)
	})
	b.Run("scan-only", func(b *testing.B) {
		var longest time.Duration
		for b.Loop() {
			t0 := time.Now()
			n := 0
			memstore.MustOf(l).Scan(context.Background(), func(memstore.Record) bool { n++; return true })
			longest = max(longest, time.Since(t0))
		}
		b.ReportMetric(float64(longest.Microseconds())/1000, "longest-visit-ms")
	})
	for _, tc := range []struct {
		name  string
		chunk int
	}{
		{"chunk=8192", 8192},
		{"chunk=32768 (default)", snapshot.DefaultChunkRecords},
		{"one-visit", 1 << 30},
	} {
		b.Run(tc.name, func(b *testing.B) {
			stop := make(chan struct{})
			lat := checker(l, stop)
			var st snapshot.WriteStats
			var longest time.Duration
			for b.Loop() {
				var err error
				st, err = snapshot.Write(context.Background(), filepath.Join(dir, "snap"), l, snapshot.WriteOptions{ChunkRecords: tc.chunk, Clock: clock.Now})
				if err != nil {
					b.Fatal(err)
				}
				longest = max(longest, st.LongestVisit)
			}
			close(stop)
			report(b, <-lat)
			b.ReportMetric(float64(longest.Microseconds())/1000, "longest-visit-ms")
			b.ReportMetric(float64(st.Visits), "visits")
			b.ReportMetric(float64(st.Bytes)/float64(st.Records), "bytes/record")
			once.Do(func() { b.Logf("%d records, %d bytes", st.Records, st.Bytes) })
		})
	}
}

// BenchmarkLoad1M loads a 1,000,000-record snapshot into an empty limiter of
// two shards. Baseline in the same run: "read-only" checks and decodes the
// same file without restoring anything.
func BenchmarkLoad1M(b *testing.B) {
	clock := limitertest.NewClock(limitertest.T0)
	src := memory.New(memory.Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
	fill(b, src, 1_000_000)
	path := filepath.Join(b.TempDir(), "snap")
	if _, err := snapshot.Write(context.Background(), path, src, snapshot.WriteOptions{Clock: clock.Now}); err != nil {
		b.Fatal(err)
	}
	src.Close()
	b.Run("read-only", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			fi, _ := f.Stat()
			n := 0
			if _, err := snapshot.Read(f, fi.Size(), func(snapshot.Record) error { n++; return nil }); err != nil || n != 1_000_000 {
				b.Fatal(n, err)
			}
			f.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ns/record")
	})
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dst := memory.New(memory.Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
			b.StartTimer()
			st, err := snapshot.Load(context.Background(), path, dst, snapshot.LoadOptions{Clock: clock.Now, Logger: discard})
			if err != nil || st.Loaded != 1_000_000 {
				b.Fatal(st, err)
			}
			b.StopTimer()
			dst.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ns/record")
	})
}
