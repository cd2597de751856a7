package buckets

import (
	"strconv"
	"testing"

	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// BenchmarkStoreCheck is the tree's share of a check: one fixed-window hit
// on one of 10,000 ids, no actor.
func BenchmarkStoreCheck(b *testing.B) {
	rs := make([]millis.Request, 10_000)
	for i := range rs {
		rs[i] = millis.Request{ID: "user-" + strconv.Itoa(i), Scale: 60_000, Limit: 1 << 30, Hits: 1}
	}
	s := New(Options{})
	now := int64(1_700_000_000_000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Check(now, rs[(i*7919)%len(rs)]); err != nil {
			b.Fatal(err)
		}
	}
}
