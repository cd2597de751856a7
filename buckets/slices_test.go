package buckets

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// slicesRef is the reference for the store's slices: every allowed hit of
// each (id, scale, slice count), summed into slice counters only when a
// check reads them, and decided by algo.SlicesCheck.
type slicesRef map[string][]struct{ at, n int64 }

func (m slicesRef) check(now int64, r millis.Request) millis.Decision {
	n := r.SlicesOrDefault()
	key := r.ID + "\x00" + strconv.FormatInt(r.Scale, 10) + "/" + strconv.FormatInt(n, 10)
	w := algo.SliceWidth(r.Scale, n)
	per := map[int64]int64{}
	for _, h := range m[key] {
		per[algo.Bucket(h.at, w)] += h.n
	}
	var list []algo.Slice
	for num, c := range per {
		list = append(list, algo.Slice{Num: num, Hits: c})
	}
	slices.SortFunc(list, func(a, b algo.Slice) int { return cmp.Compare(a.Num, b.Num) })
	d := algo.SlicesCheck(list, now, r)
	if d.Allowed && r.Hits > 0 {
		m[key] = append(m[key], struct{ at, n int64 }{now, r.Hits})
	}
	return d
}

// TestSlicesAgainstTheReference: the store's slices (the running summary
// of the current slice, the ring whose slots new slices take, the scans,
// the cache)
// decide every check as SlicesCheck over every allowed hit, for several
// ids, scales and slice counts at once, sweeps in between; and a limit
// never holds more than slices records.
func TestSlicesAgainstTheReference(t *testing.T) {
	seed := uint64(20260315)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 12 {
		s := New(Options{CacheSlots: []int{0, -1}[round%2]})
		ref := slicesRef{}
		now := int64(t0) + rng.Int64N(100_000)
		for i := range 4000 {
			now += []int64{0, 1, rng.Int64N(50), rng.Int64N(2000)}[rng.IntN(4)]
			r := millis.Request{
				ID:     "id" + strconv.Itoa(rng.IntN(3)),
				Scale:  []int64{10, 100, 1000, 6000}[rng.IntN(4)],
				Limit:  []int64{0, 1, 5, 20, rng.Int64N(40)}[rng.IntN(5)],
				Hits:   []int64{0, 1, 1, 1, 2, 7}[rng.IntN(6)],
				Algo:   rl.Slices,
				Slices: []int64{0, 2, 3, 10}[rng.IntN(4)],
			}
			if rng.IntN(50) == 0 {
				s.Sweep(now, 1+rng.IntN(20))
			}
			want := ref.check(now, r)
			got, err := s.Check(now, r)
			require.NoError(t, err)
			require.Equal(t, want, got, "seed %d round %d check %d at %d: %+v", seed, round, i, now, r)
		}
		perLimit := map[string]int64{}
		s.Scan(func(id string, scale int64, a rl.Algo, r algo.Record) bool {
			n, _ := algo.SlicesOfRecord(r)
			perLimit[id+"/"+strconv.FormatInt(scale, 10)+"/"+strconv.FormatInt(n, 10)]++
			assert.LessOrEqual(t, perLimit[id+"/"+strconv.FormatInt(scale, 10)+"/"+strconv.FormatInt(n, 10)], n, "a ring of slices")
			return true
		})
		require.NotEmpty(t, perLimit)
	}
}

func TestSlicesKeysAndListing(t *testing.T) {
	s := New(Options{})
	r := millis.Request{ID: "u", Scale: 60_000, Limit: 4, Hits: 1, Algo: rl.Slices, Slices: 6} // 10 s slices
	for _, at := range []int64{t0, t0 + 1, t0 + 10_000, t0 + 25_000} {
		d, err := s.Check(at, r)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	d, err := s.Check(t0+25_000, r)
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, int64(60_000-25_000), d.RetryAfterMS, "two hits of slice 0 leave at 60 s")
	// Another slice count of the same scale is another counter, and so is
	// another scale or algorithm.
	other := r
	other.Slices = 60
	d, err = s.Check(t0+25_000, other)
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Count)
	bs := s.Buckets("u")
	require.Len(t, bs, 4)
	assert.Equal(t, millis.Bucket{Scale: 60_000, Algo: check.AlgoName(rl.Slices), Bucket: t0 / 10_000, Slices: 6, Count: 2, Created: t0, Modified: t0 + 1}, bs[0])
	assert.Equal(t, int64(t0/10_000+1), bs[1].Bucket)
	assert.Equal(t, int64(t0/10_000+2), bs[2].Bucket)
	assert.Equal(t, int64(60), bs[3].Slices, "slice counts sort after the slices of the fewer")
	assert.Equal(t, 4, s.Delete("u", 60_000))
	assert.Zero(t, s.Len())
}

// TestSlicesLeaveTheStore: a limit's slices are a ring whose slots new
// slices take; the sweeper deletes the slices of an idle limit once they
// have left the window.
func TestSlicesLeaveTheStore(t *testing.T) {
	s := New(Options{})
	r := millis.Request{ID: "u", Scale: 1000, Limit: 100, Hits: 1, Algo: rl.Slices, Slices: 10} // 100 ms slices
	for i := range int64(30) {
		_, err := s.Check(t0+100*i, r)
		require.NoError(t, err)
		require.LessOrEqual(t, s.Len(), 10, "a ring of ten slots")
	}
	assert.Equal(t, 10, s.Len(), "the window's slices, one record each")
	bs := s.Buckets("u")
	require.Len(t, bs, 10)
	for i, b := range bs {
		assert.Equal(t, t0/100+20+int64(i), b.Bucket, "in the order of the slices, not of the ring")
	}
	_, deleted, _ := s.Sweep(t0+100*29+999, 0)
	assert.Equal(t, 9, deleted, "all but the current slice have left 1 s later")
	_, deleted, _ = s.Sweep(t0+100*29+1000, 0)
	assert.Equal(t, 1, deleted)
	assert.Zero(t, s.Len())
}

// TestSlicesRestoredSummary: a record put among a limit's slices (a
// snapshot loading into a live store) is read by the next check of the
// current slice, though that slice's summary predates it.
func TestSlicesRestoredSummary(t *testing.T) {
	s := New(Options{})
	r := millis.Request{ID: "u", Scale: 60_000, Limit: 5, Hits: 1, Algo: rl.Slices, Slices: 6}
	_, err := s.Check(t0+20_000, r)
	require.NoError(t, err)
	require.NoError(t, s.Put("u", 60_000, rl.Slices, algo.SlicesRecord(6, 4, t0, t0)))
	d, err := s.Check(t0+20_001, r)
	require.NoError(t, err)
	assert.False(t, d.Allowed, "4 restored + 1 + 1 > 5")
	assert.Equal(t, int64(5), d.Count)
	require.NoError(t, s.Put("u", 60_000, rl.Slices, algo.SlicesRecord(6, 9, t0-60_000, t0-60_000)), "its slot holds a newer slice")
	d, err = s.Check(t0+20_002, millis.Request{ID: "u", Scale: 60_000, Limit: 5, Algo: rl.Slices, Slices: 6})
	require.NoError(t, err)
	assert.Equal(t, int64(5), d.Count, "an older slice put in its slot changes nothing")
	require.Error(t, s.Put("u", 60_000, rl.Slices, algo.SlicesRecord(1, 4, t0, t0)), "one slice is no slices record")
	require.ErrorIs(t, s.Put("u", 60_000, rl.Slices, algo.SlicesRecord(601, 4, t0, t0)), rl.ErrInvalid)
}

// TestSlicesNeverRewind: a check at a time before the limit's newest slice
// (a caller whose clock ran back) is decided at that slice's last
// sighting, so no counted slice comes back into play as if unspent.
func TestSlicesNeverRewind(t *testing.T) {
	s := New(Options{})
	r := millis.Request{ID: "u", Scale: 60_000, Limit: 2, Hits: 1, Algo: rl.Slices, Slices: 6}
	_, err := s.Check(t0+50_000, r)
	require.NoError(t, err)
	_, err = s.Check(t0+70_000, r)
	require.NoError(t, err)
	d, err := s.Check(t0+10_000, r)
	require.NoError(t, err)
	assert.False(t, d.Allowed, "two hits in the window of t0+70 s")
	assert.Equal(t, int64(t0+70_000), d.Now)
	assert.Equal(t, int64(2), d.Count)
}

// TestSlicesStartWithoutScanning: at full use, round the ring several
// times, with a check or several per slice and slices skipped, a new slice
// starts from the previous one's summary: no check scans the window but the
// very first and the denied ones.
func TestSlicesStartWithoutScanning(t *testing.T) {
	for _, step := range []int64{100, 37, 250, 1100} { // 100 ms slices, a window of 1 s
		s := New(Options{})
		r := millis.Request{ID: "u", Scale: 1000, Limit: 1 << 20, Hits: 1, Algo: rl.Slices, Slices: 10}
		denied := 0
		for i := range int64(200) {
			if i == 150 {
				r.Limit = 0 // denials scan
			}
			d, err := s.Check(t0+3+step*i, r)
			require.NoError(t, err)
			if !d.Allowed {
				denied++
			}
		}
		assert.Equal(t, uint64(1+denied), s.sliceScans, "step %d ms: the first check, and each denial", step)
		assert.LessOrEqual(t, s.Len(), 10)
	}
}
