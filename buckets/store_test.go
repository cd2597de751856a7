package buckets

import (
	"fmt"
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

const t0 = 1_700_000_040_000 // a whole minute

func hit(id string, scale, limit int64) millis.Request {
	return millis.Request{ID: id, Scale: scale, Limit: limit, Hits: 1}
}

func TestCheckCountsPerKey(t *testing.T) {
	s := New(Options{})
	for i, r := range []millis.Request{
		hit("a", 1000, 5), hit("a", 1000, 5), hit("a", 60_000, 5), hit("b", 1000, 5),
		{ID: "a", Scale: 1000, Limit: 5, Hits: 1, Algo: rl.Sliding},
	} {
		_, err := s.Check(t0, r)
		require.NoError(t, err, "check %d", i)
	}
	assert.Equal(t, 4, s.Len())
	bs := s.Buckets("a")
	require.Len(t, bs, 3)
	assert.Equal(t, millis.Bucket{Scale: 1000, Algo: check.AlgoName(rl.Fixed), Bucket: t0 / 1000, Count: 2, Created: t0, Modified: t0}, bs[0])
	assert.Equal(t, check.AlgoName(rl.Sliding), bs[1].Algo, "algo sorts after scale")
	assert.Equal(t, int64(60_000), bs[2].Scale)
}

func TestDelete(t *testing.T) {
	s := New(Options{})
	for _, r := range []millis.Request{hit("a", 1000, 5), hit("a", 2000, 5), hit("a\x00", 1000, 5), hit("ab", 1000, 5)} {
		s.Check(t0, r)
	}
	assert.Equal(t, 1, s.Delete("a", 2000))
	assert.Equal(t, 1, s.Delete("a", 0))
	assert.Equal(t, 0, s.Delete("a", 0))
	assert.Equal(t, 2, s.Len(), "neighbours untouched")
	d, err := s.Check(t0, hit("a", 1000, 5))
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Count, "a deleted record starts over, cache included")
}

func TestPutAndScanRoundTrip(t *testing.T) {
	s := New(Options{})
	for i := range 50 {
		r := hit("id"+strconv.Itoa(i%7), int64(1000*(1+i%3)), 100)
		r.Algo = check.Algos[i%len(check.Algos)]
		_, err := s.Check(t0+int64(i), r)
		require.NoError(t, err)
	}
	c := New(Options{})
	s.Scan(func(id string, scale int64, a rl.Algo, r algo.Record) bool {
		if a == rl.Log {
			require.ErrorIs(t, c.Put(id, scale, a, r), rl.ErrInvalid, "a log's hits are not in its record")
			data, ok := s.AppendLog(nil, id, scale)
			require.True(t, ok)
			require.NoError(t, c.PutLog(id, scale, r.Created, data))
			return true
		}
		require.NoError(t, c.Put(id, scale, a, r))
		return true
	})
	assert.Equal(t, s.Len(), c.Len())
	for i := range 7 {
		assert.Equal(t, s.Buckets("id"+strconv.Itoa(i)), c.Buckets("id"+strconv.Itoa(i)))
	}
	assert.ErrorIs(t, c.Put("", 1000, rl.Fixed, algo.Record{}), rl.ErrInvalid)
}

func TestSweepDeletesOnlyWhatNoDecisionReads(t *testing.T) {
	s := New(Options{})
	s.Check(t0, hit("fixed", 1000, 5))
	sl := hit("sliding", 1000, 5)
	sl.Algo = rl.Sliding
	s.Check(t0, sl)

	_, del, done := s.Sweep(t0+999, 0)
	assert.True(t, done)
	assert.Equal(t, 0, del, "both windows still open")
	_, del, _ = s.Sweep(t0+1000, 0)
	assert.Equal(t, 1, del, "the fixed window ended; the sliding one is still weighed")
	assert.Len(t, s.Buckets("sliding"), 1)
	_, del, _ = s.Sweep(t0+1999, 0)
	assert.Equal(t, 0, del)
	_, del, _ = s.Sweep(t0+2000, 0)
	assert.Equal(t, 1, del)
	assert.Equal(t, 0, s.Len())

	lg := hit("log", 1000, 5)
	lg.Algo = rl.Log
	s.Check(t0, lg)
	s.Check(t0+400, lg)
	_, del, _ = s.Sweep(t0+1399, 0)
	assert.Equal(t, 0, del, "the log's newest hit is still in the window")
	_, del, _ = s.Sweep(t0+1400, 0)
	assert.Equal(t, 1, del, "a log is removed once its newest hit has left the window, not earlier")
	assert.Zero(t, s.logs.ringBytes, "its ring is given back")
}

func TestSweepIsIncremental(t *testing.T) {
	s := New(Options{})
	for i := range 100 {
		s.Check(t0, hit(fmt.Sprintf("id%03d", i), 1000, 5))
	}
	total, steps := 0, 0
	for {
		ex, del, done := s.Sweep(t0+5000, 7)
		assert.LessOrEqual(t, ex, 7)
		total += del
		steps++
		if done {
			break
		}
		// A check between steps, behind and ahead of the cursor.
		s.Check(t0+5000, hit("id000", 1000, 5))
		s.Check(t0+5000, hit("zzz", 1000, 5))
	}
	assert.Equal(t, 100, total)
	assert.Equal(t, 15, steps)
	assert.Equal(t, 2, s.Len(), "records made during the pass are live")
}

// TestSweepNeverChangesADecision replays random checks at random times
// twice, once with random incremental sweeps between them, and requires the
// same decisions; after each complete sweep no expired record may remain.
func TestSweepNeverChangesADecision(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	for round := range 20 {
		type step struct {
			at    int64
			r     millis.Request
			sweep int // budget; 0: no sweep before this check
		}
		var steps []step
		now := int64(t0) + rng.Int64N(10_000)
		for range 2000 {
			now += rng.Int64N(300)
			st := step{at: now, r: millis.Request{
				ID:    "id" + strconv.Itoa(rng.IntN(8)),
				Scale: []int64{1, 7, 100, 1000, 2500}[rng.IntN(5)],
				Limit: rng.Int64N(6),
				Hits:  rng.Int64N(3),
				Algo:  check.Algos[rng.IntN(len(check.Algos))],
			}}
			switch st.r.Algo {
			case rl.Slices:
				st.r.Slices = []int64{0, 2, 5, 60}[rng.IntN(4)]
			case rl.Leaky:
				st.r.Queue = rng.Int64N(4)
			}
			if rng.IntN(4) == 0 {
				st.sweep = 1 + rng.IntN(5)
			}
			steps = append(steps, st)
		}
		plain, swept := New(Options{}), New(Options{CacheSlots: -1 + 2*(round%2)})
		for i, st := range steps {
			if st.sweep > 0 {
				_, _, done := swept.Sweep(st.at, st.sweep)
				if done && rng.IntN(2) == 0 {
					// A complete pass: nothing expired at st.at remains.
					swept.Sweep(st.at, 0)
					swept.Scan(func(id string, scale int64, a rl.Algo, r algo.Record) bool {
						require.False(t, algo.Expired(a, scale, r, st.at), "seed %d: %s %d %v %+v expired at %d", seed, id, scale, a, r, st.at)
						return true
					})
				}
			}
			want, err := plain.Check(st.at, st.r)
			require.NoError(t, err)
			got, err := swept.Check(st.at, st.r)
			require.NoError(t, err)
			require.Equal(t, want, got, "seed %d round %d step %d at %d: %+v", seed, round, i, st.at, st.r)
		}
		require.LessOrEqual(t, swept.Len(), plain.Len())
	}
}

func TestEvictionKeepsTheStoreBounded(t *testing.T) {
	s := New(Options{MaxRecords: 100, Seed: 7})
	busy := hit("abuser", 60_000, 1_000_000)
	now := int64(t0)
	for i := range 10_000 {
		now++
		_, err := s.Check(now, hit("flood"+strconv.Itoa(i), 60_000, 5))
		require.NoError(t, err)
		d, err := s.Check(now, busy)
		require.NoError(t, err)
		require.LessOrEqual(t, s.Len(), 100)
		if i > 0 {
			// The busy id, modified at every step, keeps its count.
			require.Equal(t, int64(i+1), d.Count, "step %d", i)
		}
	}
	assert.Equal(t, uint64(10_000-99), s.Evicted)
}

// TestEvictedMemoryBecomesNewRecords floods a small store with ids of
// random lengths, some repeated, so that evicted records' memory is reused
// for ids shorter, as long and (when it has room) longer than the one it
// held. After every check each record in the store must hold exactly the
// hits its id had since it last entered the store, and the check's count
// must say the same.
func TestEvictedMemoryBecomesNewRecords(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	s := New(Options{MaxRecords: 50, Seed: seed})
	model := map[string]int64{} // hits since the id last entered the store
	ids := make([]string, 200)
	for i := range ids {
		b := make([]byte, 1+rng.IntN(40))
		for j := range b {
			b[j] = 'a' + byte(rng.IntN(26))
		}
		ids[i] = string(b) + strconv.Itoa(i)
	}
	now := int64(t0)
	for step := range 20_000 {
		now++
		id := ids[rng.IntN(len(ids))]
		d, err := s.Check(now, hit(id, 3_600_000, 1<<30))
		require.NoError(t, err)
		model[id]++
		require.Equal(t, model[id], d.Count, "seed %d step %d: the count of %q", seed, step, id)
		seen := map[string]bool{}
		s.Scan(func(rid string, _ int64, _ rl.Algo, r algo.Record) bool {
			require.Equal(t, model[rid], r.Count, "seed %d step %d: the record of %q", seed, step, rid)
			seen[rid] = true
			return true
		})
		require.LessOrEqual(t, len(seen), 50)
		for mid := range model {
			if !seen[mid] {
				delete(model, mid) // evicted: it starts again from 0
			}
		}
	}
	require.Greater(t, s.Evicted, uint64(10_000), "the test must evict")
}

func TestEvictionPrefersExpiredRecords(t *testing.T) {
	s := New(Options{MaxRecords: 4, Seed: 1})
	s.Check(t0, hit("old", 1000, 5))
	for _, id := range []string{"a", "b", "c"} {
		s.Check(t0+1500, hit(id, 60_000, 5))
	}
	s.Check(t0+1500, hit("new", 60_000, 5))
	assert.Empty(t, s.Buckets("old"), "the expired record went first")
	for _, id := range []string{"a", "b", "c", "new"} {
		assert.Len(t, s.Buckets(id), 1, id)
	}
}

func TestPutRespectsMaxRecords(t *testing.T) {
	s := New(Options{MaxRecords: 3, Seed: 3})
	for i := range 10 {
		require.NoError(t, s.Put("id"+strconv.Itoa(i), 1000, rl.Fixed, algo.Record{Count: 1, Created: t0, Modified: t0 + int64(i)}))
		assert.LessOrEqual(t, s.Len(), 3)
	}
	require.NoError(t, s.Put("id9", 1000, rl.Fixed, algo.Record{Count: 5, Created: t0, Modified: t0 + 9}))
	assert.Equal(t, uint64(7), s.Evicted, "replacing a record evicts nothing")
}

func TestScanFromResumes(t *testing.T) {
	s := New(Options{})
	for _, r := range []millis.Request{hit("a", 1000, 5), hit("a", 2000, 5), hit("b", 1000, 5), hit("c", 1000, 5)} {
		s.Check(t0, r)
	}
	var seen []string
	s.ScanFrom("a", 2000, rl.Fixed, 0, t0/2000, func(id string, scale int64, _ rl.Algo, _ algo.Record) bool {
		seen = append(seen, id+"/"+strconv.FormatInt(scale, 10))
		return true
	})
	assert.Equal(t, []string{"a/2000", "b/1000", "c/1000"}, seen)
	seen = nil
	s.ScanFrom("a", 2000, rl.Fixed, 0, t0/2000+1, func(id string, scale int64, _ rl.Algo, _ algo.Record) bool {
		seen = append(seen, id)
		return len(seen) < 1
	})
	assert.Equal(t, []string{"b"}, seen, "starts after a key that sorts past a's last record; stops on false")
}

// TestEvictionKeepsThrottledIDsThrottled: at the bound, a flood of fresh
// ids evicts idle records, never the record of an id that is being denied
// (it keeps hammering): a client cannot reset its own limit by minting ids.
func TestEvictionKeepsThrottledIDsThrottled(t *testing.T) {
	for _, a := range check.Algos {
		t.Run(a.String(), func(t *testing.T) {
			s := New(Options{MaxRecords: 200, Seed: 7})
			thr := millis.Request{ID: "throttled", Scale: 3_600_000, Limit: 3, Hits: 1, Algo: a}
			if a == rl.Leaky {
				thr.Queue = 2 // three pass (two of them wait), then the queue is full
			}
			now := int64(t0)
			for range 3 {
				d, err := s.Check(now, thr)
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			allowed := 0
			for i := range 20_000 {
				now++
				_, err := s.Check(now, millis.Request{ID: "fresh-" + strconv.Itoa(i), Scale: 3_600_000, Limit: 3, Hits: 1, Algo: a})
				require.NoError(t, err)
				if i%50 == 0 {
					d, err := s.Check(now, thr)
					require.NoError(t, err)
					if d.Allowed {
						allowed++
					}
				}
			}
			assert.Zero(t, allowed, "the throttled id stayed throttled through 20,000 fresh ids")
			assert.LessOrEqual(t, s.load(), 200)
			assert.Positive(t, s.Evicted)
		})
	}
}

func TestScalesPerIDAreBounded(t *testing.T) {
	s := New(Options{MaxScalesPerID: 3})
	for scale := int64(1000); scale <= 3000; scale += 1000 {
		_, err := s.Check(t0, hit("u", scale, 5))
		require.NoError(t, err)
	}
	_, err := s.Check(t0, hit("u", 4000, 5))
	require.ErrorIs(t, err, ErrTooManyScales)
	require.ErrorIs(t, err, rl.ErrInvalid)
	lg := hit("u", 5000, 5)
	lg.Algo = rl.Log
	_, err = s.Check(t0, lg)
	require.ErrorIs(t, err, ErrTooManyScales, "a log record too")
	_, err = s.Check(t0+1, hit("u", 2000, 5))
	require.NoError(t, err, "its scales go on counting")
	sl := hit("u", 3000, 5)
	sl.Algo = rl.Sliding
	_, err = s.Check(t0+1, sl)
	require.NoError(t, err, "another algorithm at a scale it has")
	_, err = s.Check(t0, hit("other", 4000, 5))
	require.NoError(t, err, "other ids are not bound by it")
	assert.Len(t, s.Buckets("u"), 4)
}
