package memory

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
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
				_, err := s.Check(now, millis.Request{ID: id(i), Scale: 60_000, Limit: 10, Hits: 1, Algo: rl.Algo(i % 3)})
				require.NoError(t, err)
			}
			for i := range n {
				hit(2 * i) // even ids; odd ones are inserted later
			}
			deleted := map[string]bool{}
			seen := map[string]bool{}
			copyOut := func(r record) error {
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

// TestCursorResumesWithinSlices: a copy one record a visit resumes
// between the slices of one limit and between two slice counts of one
// scale, whose records differ only in those.
func TestCursorResumesWithinSlices(t *testing.T) {
	const now = int64(1_700_000_040_000)
	s := buckets.New(buckets.Options{})
	for i, n := range []int64{2, 6, 60} {
		for k := range int64(5) {
			for _, id := range []string{"a", "b"} {
				r := millis.Request{ID: id, Scale: 60_000, Limit: 100, Hits: 1 + int64(i), Algo: rl.Slices, Slices: n}
				_, err := s.Check(now+k*1000, r)
				require.NoError(t, err)
			}
		}
	}
	var want []record
	s.Scan(func(id string, scale int64, a rl.Algo, r algo.Record) bool {
		want = append(want, record{ID: strings.Clone(id), Scale: scale, Algo: a, State: r})
		return true
	})
	require.Len(t, want, 2*(1+1+5), "4 s of hits: 1 slice of 30 s, 1 of 10 s, 5 of 1 s, for each id")
	var got []record
	var c cursor
	for visits := 0; ; visits++ {
		require.Less(t, visits, 100)
		done, err := c.visit(s, now+4000, 1, func(r record) error {
			r.ID = strings.Clone(r.ID)
			got = append(got, r)
			return nil
		})
		require.NoError(t, err)
		if done {
			break
		}
	}
	assert.Equal(t, want, got)
}
