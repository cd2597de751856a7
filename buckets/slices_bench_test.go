package buckets

import (
	"fmt"
	"runtime"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// BenchmarkSlicesCheck is a check of the sliding window counters at 60
// slices, at full use (1,000 ids, each holding a record in all 60 slices of
// its window, an hour in minutes), beside a fixed window's check on the
// same ids in the same run: the baseline. perSlice is how many checks each
// id makes per slice: the first check of a slice takes the slot of the
// slice that left (a tree search), the others read the current slice's
// summary. cpu-ns/op is the benchmark thread's CPU time per check (Linux).
func BenchmarkSlicesCheck(b *testing.B) {
	const ids, slices = 1000, 60
	const scale = 3_600_000 // an hour, in slices of a minute
	const w = scale / slices
	names := make([]string, ids)
	for i := range names {
		names[i] = fmt.Sprintf("id-%013d", i*7919%ids)
	}
	for _, perSlice := range []int{1, 10, 100} {
		for _, a := range []rl.Algo{rl.Fixed, rl.Slices} {
			b.Run(fmt.Sprintf("perSlice=%d/%v", perSlice, a), func(b *testing.B) {
				s := New(Options{})
				req := millis.Request{Scale: scale, Limit: 1 << 30, Hits: 1, Algo: a}
				now := int64(1_700_000_000_000)
				now -= now % w
				// Fill every slice of the window.
				for range slices {
					for _, n := range names {
						req.ID = n
						if _, err := s.Check(now, req); err != nil {
							b.Fatal(err)
						}
					}
					now += w
				}
				step := max(1, w/int64(perSlice*ids)) // the clock's move per check
				runtime.LockOSThread()                // threadCPU reads this thread's time
				defer runtime.UnlockOSThread()
				b.ReportAllocs()
				i := 0
				cpu0 := threadCPU()
				for b.Loop() {
					req.ID = names[i%ids]
					if _, err := s.Check(now, req); err != nil {
						b.Fatal(err)
					}
					i++
					now += step
				}
				b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(s.Len())/ids, "records/id")
			})
		}
	}
}

// BenchmarkSlicesMemory holds 10,000 ids of 16 bytes at full use of 60
// slices (a record in every slice of the window) and reports the heap per
// id and per slice, the tree's nodes and the ids' bytes included; the fixed
// window's single record per id is the baseline.
func BenchmarkSlicesMemory(b *testing.B) {
	const ids, slices = 10_000, 60
	const scale = 3_600_000
	for _, a := range []rl.Algo{rl.Fixed, rl.Slices} {
		b.Run(a.String(), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				s := New(Options{CacheSlots: -1}) // the cache's fixed size is not per id
				names := make([]string, ids)
				for i := range names {
					names[i] = fmt.Sprintf("id-%013d", i*7919%ids)
				}
				now := int64(1_700_000_000_000)
				for range slices {
					for _, id := range names {
						if _, err := s.Check(now, millis.Request{ID: id, Scale: scale, Limit: 1000, Hits: 1, Algo: a}); err != nil {
							b.Fatal(err)
						}
					}
					now += scale / slices
				}
				names = nil // the ids live on in the records only
				runtime.GC()
				runtime.ReadMemStats(&after)
				perID := float64(after.HeapAlloc-before.HeapAlloc) / ids
				b.ReportMetric(perID, "B/id")
				b.ReportMetric(float64(s.Len())/ids, "records/id")
				b.ReportMetric(perID/(float64(s.Len())/ids), "B/record")
				runtime.KeepAlive(s)
			}
		})
	}
}
