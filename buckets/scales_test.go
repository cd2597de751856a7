package buckets

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// TestSliceCountsCountAsScales: each slice count of a scale's Slices
// records is a scale of its own for MaxScalesPerID (one id cannot plant
// 599 Slices limits of up to 600 records under one scale); a scale's
// records of the other algorithms count once.
func TestSliceCountsCountAsScales(t *testing.T) {
	s := New(Options{MaxScalesPerID: 3})
	req := func(scale int64, a rl.Algo, slices int64) millis.Request {
		return millis.Request{ID: "u", Scale: scale, Limit: 1000, Hits: 1, Algo: a, Slices: slices}
	}
	for _, r := range []millis.Request{
		req(60_000, rl.Fixed, 0), req(60_000, rl.Token, 0), req(60_000, rl.Log, 0), // one scale
		req(60_000, rl.Slices, 2), req(60_000, rl.Slices, 3), // two more
		req(60_000, rl.Leaky, 0), req(60_000, rl.Sliding, 0), // the first scale again
	} {
		_, err := s.Check(t0, r)
		require.NoError(t, err, "%v slices %d", r.Algo, r.Slices)
	}
	for _, r := range []millis.Request{req(60_000, rl.Slices, 4), req(60_000, rl.Slices, 600), req(120_000, rl.Slices, 2), req(120_000, rl.Fixed, 0)} {
		_, err := s.Check(t0, r)
		require.ErrorIs(t, err, ErrTooManyScales, "%v scale %d slices %d", r.Algo, r.Scale, r.Slices)
	}
	// The limits it has go on counting, into slices of their own.
	for now := int64(t0); now < t0+120_000; now += 7_000 {
		for _, n := range []int64{2, 3} {
			_, err := s.Check(now, req(60_000, rl.Slices, n))
			require.NoError(t, err, "slices %d at +%d", n, now-t0)
		}
	}
	_, err := s.Check(t0, millis.Request{ID: "v", Scale: 60_000, Limit: 5, Hits: 1, Algo: rl.Slices, Slices: 4})
	require.NoError(t, err, "other ids are not bound by it")
}

// TestScaleCountSeeks: an id holding 63 limits, 60 of them Slices limits
// of about 600 records each (35,000 records), gets a new scale, then is
// refused one more; each of those checks seeks from one limit to the next
// (about one seek a limit) instead of reading the id's every record.
func TestScaleCountSeeks(t *testing.T) {
	const maxScales = 64
	s := New(Options{MaxScalesPerID: maxScales})
	now := int64(t0)
	records := 0
	for _, scale := range []int64{600, 1200, 1800} {
		for _, a := range []rl.Algo{rl.Fixed, rl.Token, rl.Leaky} {
			_, err := s.Check(now, millis.Request{ID: "big", Scale: scale, Limit: 1 << 30, Hits: 1, Algo: a})
			require.NoError(t, err)
		}
		for n := int64(600); n > 580; n-- {
			w := algo.SliceWidth(scale, n)
			for range n { // a check in every slice: the whole ring
				now += w
				d, err := s.Check(now, millis.Request{ID: "big", Scale: scale, Limit: 1 << 30, Hits: 1, Algo: rl.Slices, Slices: n})
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			records += int(n)
		}
	}
	require.Equal(t, 63, s.scalesOf("big"))
	require.Greater(t, s.Len(), records, "the rings are full")

	s.scaleSeeks = 0
	_, err := s.Check(now, millis.Request{ID: "big", Scale: 2400, Limit: 5, Hits: 1})
	require.NoError(t, err, "the 64th scale")
	first := s.scaleSeeks
	s.scaleSeeks = 0
	_, err = s.Check(now, millis.Request{ID: "big", Scale: 3000, Limit: 5, Hits: 1, Algo: rl.Slices, Slices: 60})
	require.ErrorIs(t, err, ErrTooManyScales, "the 65th")
	second := s.scaleSeeks
	t.Logf("seeks: %d and %d, over %d records", first, second, s.Len())
	// One seek a limit, one more for each scale's algorithms after Slices
	// and the end: 64 + 4 + 1, and the checks' own look for the limit.
	assert.LessOrEqual(t, first, uint64(2*maxScales), "the 64th scale's check")
	assert.LessOrEqual(t, second, uint64(2*maxScales), "the refused check")
}

// TestScaleCountMatchesTheRecords: scalesOf, seeking, counts what a walk
// over every record counts, for random ids, scales, algorithms and slice
// counts, with records deleted in between.
func TestScaleCountMatchesTheRecords(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	s := New(Options{MaxScalesPerID: 1 << 20})
	ids := []string{"a", "ab", "b", "b\x00", "c"}
	now := int64(t0)
	for step := range 3000 {
		now += rng.Int64N(30)
		id := ids[rng.IntN(len(ids))]
		r := millis.Request{ID: id, Scale: []int64{1, 10, 600, 6000, 1 << 38}[rng.IntN(5)], Limit: 1 << 20, Hits: 1,
			Algo: check.Algos[rng.IntN(len(check.Algos))]}
		if r.Algo == rl.Slices {
			r.Slices = []int64{2, 3, 59, 600}[rng.IntN(4)]
			if algo.SliceWidth(r.Scale, r.Slices) < 1 || r.Scale < r.Slices {
				continue
			}
		}
		_, err := s.Check(now, r)
		require.NoError(t, err)
		if rng.IntN(50) == 0 {
			s.Delete(ids[rng.IntN(len(ids))], []int64{0, 600}[rng.IntN(2)])
		}
		for _, id := range ids {
			require.Equal(t, walkScales(s, id), s.scalesOf(id), "seed %d step %d id %q", seed, step, id)
		}
	}
}

// walkScales counts id's limits as MaxScalesPerID does, by reading every
// record.
func walkScales(s *Store, id string) int {
	type limit struct{ scale, slices int64 }
	seen := map[limit]bool{}
	s.Scan(func(rid string, scale int64, a rl.Algo, r algo.Record) bool {
		if rid == id {
			l := limit{scale, 0}
			if a == rl.Slices {
				l.slices, _ = algo.SlicesOfRecord(r)
			}
			seen[l] = true
		}
		return true
	})
	return len(seen)
}

// TestScaleCountAtTheBoundaries: at the longest scale and the most slices
// the seeks' keys stay in range, a scale's limits never count twice, and
// the count never strays into a neighbouring id.
func TestScaleCountAtTheBoundaries(t *testing.T) {
	s := New(Options{MaxScalesPerID: 2})
	long := int64(millis.MaxScale)
	for _, r := range []millis.Request{
		{ID: "z", Scale: long, Limit: 5, Hits: 1, Algo: rl.Leaky},
		{ID: "z", Scale: long, Limit: 5, Hits: 1, Algo: rl.Slices, Slices: check.MaxSlices},
		{ID: "z", Scale: long, Limit: 5, Hits: 1, Algo: rl.Fixed},
	} {
		_, err := s.Check(t0, r)
		require.NoError(t, err, "%v", r.Algo)
	}
	_, err := s.Check(t0, millis.Request{ID: "z", Scale: 1, Limit: 5, Hits: 1})
	require.ErrorIs(t, err, ErrTooManyScales)
	assert.Equal(t, 2, s.scalesOf("z"))
	assert.Equal(t, 0, s.scalesOf("y"), "an id sorting before")
	assert.Equal(t, 0, s.scalesOf("z\x00"), "an id sorting after")
	assert.Equal(t, 0, s.scalesOf(strconv.Itoa(1)))
}
