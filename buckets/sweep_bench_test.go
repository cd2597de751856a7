package buckets

import (
	"fmt"
	"testing"

	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// BenchmarkSweepStep measures one incremental sweep step of 256 records (the actor's sweepBudget) in
// a store of 1,000,000, when none is expired and when all are.
func BenchmarkSweepStep(b *testing.B) {
	const n = 1_000_000
	s := New(Options{})
	for i := range n {
		s.Check(t0, millis.Request{ID: fmt.Sprintf("id-%013d", i), Scale: 1000, Limit: 10, Hits: 1})
	}
	b.Run("live", func(b *testing.B) {
		for b.Loop() {
			s.Sweep(t0+1, 256)
		}
	})
	b.Run("expired", func(b *testing.B) {
		deleted := 0
		for b.Loop() {
			if s.Len() == 0 {
				b.StopTimer()
				for i := range n {
					s.Check(t0, millis.Request{ID: fmt.Sprintf("id-%013d", i), Scale: 1000, Limit: 10, Hits: 1})
				}
				b.StartTimer()
			}
			_, del, _ := s.Sweep(t0+5000, 256)
			deleted += del
		}
		b.ReportMetric(float64(deleted)/float64(b.N), "deleted/op")
	})
}
