package memory

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
)

// TestCursorUnderDeletesAndInserts drives the chunked copy of one store by
// hand, changing the store between visits, including deleting thousands of
// records behind the cursor and the record it stands on.
func TestCursorUnderDeletesAndInserts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		massDelete bool
	}{
		{name: "churn around the cursor", massDelete: false},
		{name: "mass delete behind the cursor", massDelete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rnd := rand.New(rand.NewPCG(seed, 7))
			const now, n, chunk = int64(1_700_000_000_000), 12_000, 250
			s := buckets.New(buckets.Options{})
			id := func(i int) string { return fmt.Sprintf("id%06d", i) }
			hit := func(i int) {
				_, err := s.Check(now, rl.Request{ID: id(i), Scale: 60_000, Limit: 10, Hits: 1, Algo: rl.Algo(i % 3)})
				require.NoError(t, err)
			}
			for i := range n {
				hit(2 * i) // even ids; odd ones are inserted later
			}
			deleted := map[string]bool{}
			seen := map[string]bool{}
			copyOut := func(r Record) error {
				assert.False(t, seen[r.ID], "%s copied twice", r.ID)
				seen[r.ID] = true
				return nil
			}
			var c cursor
			for visits := 0; ; visits++ {
				require.Less(t, visits, 10*n/chunk, "the copy does not end")
				done, err := c.visit(s, now, chunk, copyOut)
				require.NoError(t, err)
				if done {
					break
				}
				for range 20 {
					hit(2*rnd.IntN(n) + 1) // inserts anywhere, before or after the cursor
					i := 2 * rnd.IntN(n)
					if s.Delete(id(i), 0) > 0 {
						deleted[id(i)] = true
					}
				}
				if tc.massDelete && visits == n/chunk/2 {
					// Everything behind the cursor, and the record it is on.
					for i := range n {
						if id(2*i) > c.last.id {
							break
						}
						if s.Delete(id(2*i), 0) > 0 {
							deleted[id(2*i)] = true
						}
					}
					require.Greater(t, len(deleted), 2000, "a mass delete")
				}
			}

			for i := range n {
				if !deleted[id(2*i)] {
					assert.True(t, seen[id(2*i)], "%s, never deleted, is missing", id(2*i))
				}
			}
		})
	}
}
