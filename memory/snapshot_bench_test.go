package memory

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// fill gives l n records, a third of each of the first three algorithms.
func fill(b *testing.B, l *Limiter, n int) {
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
func checker(l *Limiter, stop <-chan struct{}) <-chan []time.Duration {
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

// BenchmarkSave1M saves one shard holding 1,000,000 records while a
// goroutine keeps checking on that shard, and reports how long the checks
// waited. Baselines in the same run: "idle" runs the checker with no save,
// "one-visit" copies the whole shard in a single visit. BenchmarkVisitCPU
// measures the visits themselves.
func BenchmarkSave1M(b *testing.B) {
	clock := limitertest.NewClock(limitertest.T0)
	l := New(Config{Shards: 1, Clock: clock.Now, SweepInterval: -1})
	defer l.Close()
	fill(b, l, 1_000_000)
	var once sync.Once
	b.Run("idle", func(b *testing.B) {
		stop := make(chan struct{})
		lat := checker(l, stop)
		for b.Loop() {
			time.Sleep(50 * time.Millisecond) // a stand-in for a save's duration
		}
		close(stop)
		report(b, <-lat)
	})
	for _, tc := range []struct {
		name  string
		chunk int
	}{
		{"chunk=8192", 8192},
		{"chunk=32768 (Save)", saveChunk},
		{"one-visit", 1 << 30},
	} {
		b.Run(tc.name, func(b *testing.B) {
			stop := make(chan struct{})
			lat := checker(l, stop)
			var st saveStats
			var longest time.Duration
			var w countingWriter
			for b.Loop() {
				var err error
				w.n = 0
				if st, err = l.save(context.Background(), &w, tc.chunk); err != nil {
					b.Fatal(err)
				}
				longest = max(longest, st.longestVisit)
			}
			close(stop)
			report(b, <-lat)
			b.ReportMetric(float64(longest.Microseconds())/1000, "longest-visit-ms")
			b.ReportMetric(float64(st.visits), "visits")
			b.ReportMetric(float64(w.n)/float64(st.records), "bytes/record")
			once.Do(func() { b.Logf("%d records, %d bytes", st.records, w.n) })
		})
	}
}

// countingWriter counts the bytes written to it and keeps none.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// BenchmarkLoad1M loads a 1,000,000-record snapshot into an empty limiter
// of two shards. Baseline in the same run: "read-only" verifies and decodes
// the same snapshot without restoring anything.
func BenchmarkLoad1M(b *testing.B) {
	clock := limitertest.NewClock(limitertest.T0)
	src := New(Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
	fill(b, src, 1_000_000)
	var buf bytes.Buffer
	if err := src.Save(context.Background(), &buf); err != nil {
		b.Fatal(err)
	}
	src.Close()
	data := buf.Bytes()
	var r io.ReaderAt = bytes.NewReader(data)
	b.Run("read-only", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if _, err := readSnapshot(r, int64(len(data)), func(record) error { n++; return nil }); err != nil || n != 1_000_000 {
				b.Fatal(n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ns/record")
	})
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dst := New(Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
			b.StartTimer()
			n, err := dst.Load(context.Background(), r, int64(len(data)))
			if err != nil || n != 1_000_000 {
				b.Fatal(n, err)
			}
			b.StopTimer()
			dst.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ns/record")
	})
}
