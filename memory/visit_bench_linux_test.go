//go:build linux

package memory

import (
	"context"
	"encoding/binary"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
)

// threadCPU returns the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var r syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// BenchmarkVisitCPU copies a shard of 1,000,000 records and reports the CPU
// time of each visit to the shard's goroutine (median and longest), measured
// on the actor's thread, so that other processes on a busy machine do not
// inflate it as they inflate wall-clock times. Baselines in the same run:
// "scan-only" (one visit that walks the tree and does nothing else: the floor
// of a visit that must find its place with Scan) and "one-visit" (the whole
// shard copied at once).
func BenchmarkVisitCPU(b *testing.B) {
	now := int64(1_700_000_000_000)
	l := New(Config{Shards: 1, Clock: func() time.Time { return time.UnixMilli(now) }, SweepInterval: -1})
	defer l.Close()
	ctx := context.Background()
	batch := make([]rl.Request, 0, 1000)
	for i := range 1_000_000 {
		batch = append(batch, rl.Request{ID: "user:" + strconv.Itoa(i), Scale: time.Hour, Limit: 100, Hits: 1, Algo: rl.Algo(i % 3)})
		if len(batch) == cap(batch) {
			if _, err := l.CheckRates(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	a := l.actors[0]
	// measure runs fn on the actor's goroutine, pinned to its thread.
	measure := func(fn func(s *buckets.Store, now int64)) time.Duration {
		var d time.Duration
		if err := a.Do(ctx, func(s *buckets.Store, now int64) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := threadCPU()
			fn(s, now)
			d = threadCPU() - t0
		}); err != nil {
			b.Fatal(err)
		}
		return d
	}
	report := func(b *testing.B, ds []time.Duration) {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "median-visit-cpu-ms")
		b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "max-visit-cpu-ms")
	}
	b.Run("scan-only", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			ds = append(ds, measure(func(s *buckets.Store, _ int64) {
				s.Scan(func(string, int64, rl.Algo, algo.Record) bool { return true })
			}))
		}
		report(b, ds)
	})
	for _, tc := range []struct {
		name  string
		chunk int
	}{{"chunk=8192", 8192}, {"chunk=32768", 32768}, {"one-visit", 1 << 30}} {
		b.Run(tc.name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				var c cursor
				var out []byte
				// What a snapshot does with each record, roughly: its id
				// and numbers appended to a buffer.
				copyOut := func(r record) error {
					out = append(out, r.ID...)
					out = binary.AppendVarint(out, r.Scale)
					out = binary.AppendVarint(out, r.State.Count)
					out = binary.AppendVarint(out, r.State.Created)
					out = binary.AppendVarint(out, r.State.Modified)
					return nil
				}
				for done := false; !done; {
					out = out[:0]
					ds = append(ds, measure(func(s *buckets.Store, now int64) {
						var err error
						if done, err = c.visit(s, now, tc.chunk, copyOut); err != nil {
							b.Fatal(err)
						}
					}))
				}
			}
			report(b, ds)
		})
	}
}
