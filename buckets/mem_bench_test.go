package buckets

import (
	"fmt"
	"runtime"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// BenchmarkMemory holds 1,000,000 live buckets with 16-byte ids and reports
// the heap they take per bucket, the ids' bytes included.
func BenchmarkMemory(b *testing.B) {
	const n = 1_000_000
	now := int64(1_700_000_000_000)
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New(Options{})
		for i := range n {
			id := fmt.Sprintf("id-%013d", i*7919%n) // 16 bytes, inserted out of order
			if _, err := s.Check(now, millis.Request{ID: id, Scale: 60_000, Limit: 10, Hits: 1}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.Len() != n {
			b.Fatalf("%d live buckets, want %d", s.Len(), n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/bucket")
		runtime.KeepAlive(s)
	}
}

// BenchmarkLogMemory holds 10,000 full sliding window logs (ids of 16 bytes,
// one hit every scale/limit ms, so each log holds limit entries) at limits
// of 10, 100 and 1000, and reports the heap per id: record, slab entry and
// ring.
func BenchmarkLogMemory(b *testing.B) {
	const ids = 10_000
	const scale = 60_000
	for _, limit := range []int64{10, 100, 1000} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				s := New(Options{CacheSlots: -1})
				names := make([]string, ids)
				for i := range names {
					names[i] = fmt.Sprintf("id-%013d", i)
				}
				now := int64(1_700_000_000_000)
				step := scale / limit
				for range limit {
					now += step
					for _, id := range names {
						if _, err := s.Check(now, millis.Request{ID: id, Scale: scale, Limit: limit, Hits: 1, Algo: rl.Log}); err != nil {
							b.Fatal(err)
						}
					}
				}
				names = nil // the ids live on in the records only
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/ids, "B/id")
				b.ReportMetric(float64(s.logs.ringBytes)/ids, "ring-B/id")
				runtime.KeepAlive(s)
			}
		})
	}
}
