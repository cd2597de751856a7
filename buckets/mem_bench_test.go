package buckets

import (
	"fmt"
	"runtime"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
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
			if _, err := s.Check(now, rl.Request{ID: id, Scale: 60_000, Limit: 10, Hits: 1}); err != nil {
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
