package buckets

import (
	"strconv"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// BenchmarkAlgoCheck is the per-check cost of each algorithm through the
// store: 10,000 ids, each with a record, checked round robin, the clock
// moving 1 ms every 100 checks inside one-minute windows (so the sliding
// window finds its previous bucket after the first minute, as in use).
// Fixed is the baseline.
func BenchmarkAlgoCheck(b *testing.B) {
	const ids = 10_000
	names := make([]string, ids)
	for i := range names {
		names[i] = "user-" + strconv.Itoa(i*7919)
	}
	for _, a := range check.Algos {
		b.Run(a.String(), func(b *testing.B) {
			s := New(Options{})
			now := int64(1_700_000_040_000) - 30_000 // half a window before a boundary
			req := millis.Request{Scale: 60_000, Limit: 1000, Hits: 1, Algo: a}
			for _, n := range names {
				req.ID = n
				if _, err := s.Check(now, req); err != nil {
					b.Fatal(err)
				}
			}
			now += 30_000
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				req.ID = names[i%ids]
				if _, err := s.Check(now, req); err != nil {
					b.Fatal(err)
				}
				i++
				if i%100 == 0 {
					now++
				}
			}
		})
	}
}

// BenchmarkAlgoFunc is the decision alone, without the tree: the pure
// functions on a record a quarter into a window whose previous bucket holds
// 600 hits. Fixed is the baseline.
func BenchmarkAlgoFunc(b *testing.B) {
	const start = int64(1_700_000_040_000)
	cur := algo.Record{Count: 200, Created: start, Modified: start}
	prev := algo.Record{Count: 600, Created: start - 60_000, Modified: start - 1}
	for _, a := range check.Algos {
		if a == rl.Log || a == rl.Slices {
			continue // not decided from one record: LogCheck and SlicesCheck have benchmarks of their own
		}
		b.Run(a.String(), func(b *testing.B) {
			r := millis.Request{ID: "u", Scale: 60_000, Limit: 1000, Hits: 1, Algo: a}
			st := cur
			if a == rl.Token || a == rl.Leaky {
				_, st, _ = algo.Token(algo.Record{}, false, start, millis.Request{ID: "u", Scale: 60_000, Limit: 1000, Hits: 700, Algo: rl.Token})
			}
			b.ReportAllocs()
			var sink int64
			now := start + 15_000
			for b.Loop() {
				d, _, _ := algo.Check(st, true, prev, true, now, r)
				sink += d.Count
			}
			if sink == 0 {
				b.Fatal("no decision counted")
			}
		})
	}
}
