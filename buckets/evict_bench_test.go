package buckets

import (
	"strconv"
	"testing"

	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// BenchmarkFloodAtCap is a flood of distinct ids into a full store of
// 200,000 records: every check creates a record and evicts one.
func BenchmarkFloodAtCap(b *testing.B) {
	const max = 200_000
	s := New(Options{MaxRecords: max, Seed: 1})
	for i := range max {
		s.Check(t0, millis.Request{ID: "f" + strconv.Itoa(i), Scale: 60_000, Limit: 10, Hits: 1})
	}
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = "g" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Check(t0+int64(i), millis.Request{ID: ids[i%len(ids)] + "-" + strconv.Itoa(i>>16), Scale: 60_000, Limit: 10, Hits: 1})
	}
	if s.Len() > max {
		b.Fatalf("%d records over the cap of %d", s.Len(), max)
	}
}
