package buckets

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// TestMaxBytesBoundsLongIDs: ids of 1,000 bytes, with every algorithm, fill
// a store bounded at 200,000 bytes and 1,000,000 records: the byte budget
// binds (about 190 records), not the record count.
func TestMaxBytesBoundsLongIDs(t *testing.T) {
	const maxBytes = 200_000
	s := New(Options{MaxRecords: 1_000_000, MaxBytes: maxBytes, Seed: 5})
	pad := strings.Repeat("x", 990)
	now := int64(t0)
	for i := range 5000 {
		now++
		a := check.Algos[i%len(check.Algos)]
		r := millis.Request{ID: pad + strconv.Itoa(i), Scale: 3_600_000, Limit: 1000, Hits: 1, Algo: a}
		if a == rl.Slices {
			r.Slices = 600
		}
		_, err := s.Check(now, r)
		require.NoError(t, err)
		require.LessOrEqual(t, s.bytesHeld(), maxBytes, "check %d", i)
	}
	assert.LessOrEqual(t, s.Len(), maxBytes/recordBytes(1000))
	assert.Greater(t, s.Len(), maxBytes/recordBytes(1000)*3/4, "the budget is used")
	assert.Greater(t, s.Evicted, uint64(4000))
	assert.Equal(t, recountBytes(s), s.bytesHeld())
}

// TestMaxBytesBoundsAGrowingLog: a log that grows in place past the budget
// evicts other records, never itself (a record larger than the budget is
// kept alone).
func TestMaxBytesBoundsAGrowingLog(t *testing.T) {
	const maxBytes = 10_000
	s := New(Options{MaxBytes: maxBytes, Seed: 9})
	now := int64(t0)
	for i := range 100 {
		_, err := s.Check(now, hit("idle-"+strconv.Itoa(i), 3_600_000, 5))
		require.NoError(t, err)
	}
	lg := millis.Request{ID: "log", Scale: 3_600_000, Limit: 60_000, Hits: 1, Algo: rl.Log}
	for i := range 10_000 {
		now++
		d, err := s.Check(now, lg)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.Equal(t, int64(i+1), d.Count, "the log keeps its hits")
		if s.Len() > 1 {
			require.LessOrEqual(t, s.bytesHeld(), maxBytes, "check %d", i)
		}
	}
	assert.Equal(t, recountBytes(s), s.bytesHeld())
	assert.Equal(t, 1, s.Len(), "the idle records made room; the log, past the budget alone, stays")
}

// TestBytesFollowEveryChange: the store's bytes are its records' sizes and
// its logs' rings after checks of ids of random lengths and algorithms at a
// byte bound, deletes, sweeps, and restored records.
func TestBytesFollowEveryChange(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	const maxBytes = 30_000
	s := New(Options{MaxBytes: maxBytes, Seed: seed})
	id := func() string { return strings.Repeat("i", rng.IntN(300)) + strconv.Itoa(rng.IntN(100)) }
	now := int64(t0)
	for step := range 20_000 {
		now += rng.Int64N(20)
		switch rng.IntN(40) {
		case 0:
			s.Delete(id(), 0)
		case 1:
			s.Sweep(now, 50)
		case 2:
			require.NoError(t, s.Put(id(), 60_000, rl.Fixed, algo.Record{Count: 3, Created: now, Modified: now}))
		case 3:
			var l algo.Log
			algo.LogCheck(&l, now, millis.Request{ID: "x", Scale: 60_000, Limit: 100, Hits: 40, Algo: rl.Log})
			data, _ := l.AppendBinary(nil)
			require.NoError(t, s.PutLog(id(), 60_000, now, data))
		default:
			r := millis.Request{ID: id(), Scale: []int64{100, 60_000}[rng.IntN(2)], Limit: 50, Hits: 1 + rng.Int64N(3),
				Algo: check.Algos[rng.IntN(len(check.Algos))]}
			if r.Algo == rl.Slices {
				r.Slices = 10
			}
			_, err := s.Check(now, r)
			require.NoError(t, err)
		}
		require.Equal(t, recountBytes(s), s.bytesHeld(), "seed %d step %d", seed, step)
		require.LessOrEqual(t, s.bytesHeld(), maxBytes, "seed %d step %d", seed, step)
	}
	require.Positive(t, s.Evicted)
}

// recountBytes adds up what Store.Bytes should be from the records.
func recountBytes(s *Store) int {
	n := 0
	s.tree.Scan(func(p *rec) bool {
		n += recordBytes(len(p.id()))
		if p.algo() == rl.Log {
			n += s.logs.logs[p.count].Bytes()
		}
		return true
	})
	return n
}
