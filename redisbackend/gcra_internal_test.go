package redisbackend

import (
	"context"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// TestGCRAScriptWritesWhatAlgoWrites drives gcra.lua (the token bucket's and
// the leaky bucket's script) where its arithmetic is hardest: scales and
// limits whose products pass 2^52 (the script's two-limb path), a limit
// that changes between checks of one record (the stored fraction converted
// to another denominator), and checks exactly at the moment a denied
// request would be let in, and one millisecond before (the comparison's
// edge). After every check the record in Redis must be, field by field,
// the one package algo writes, and every decision algo's. Seeded.
func TestGCRAScriptWritesWhatAlgoWrites(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 2))
	srv := redistest.Start(t)
	clock := limitertest.NewClock(limitertest.T0)
	b, err := newBackend(Config{URL: srv.URL(), Prefix: "gc", Clock: clock.Now, Timeout: 5 * time.Second, DenyCache: -1}, 0)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	pick := func(xs ...int64) int64 { return xs[rnd.IntN(len(xs))] }
	for _, a := range []rl.Algo{rl.Token, rl.Leaky} {
		prefix := a.String()
		f := map[rl.Algo]func(algo.Record, bool, int64, millis.Request) (millis.Decision, algo.Record, bool){
			rl.Token: algo.Token, rl.Leaky: algo.Leaky}[a]
		edges, slow := 0, 0
		for round := range 40 {
			// S/L = 100 for the first limit: a denial's retry lands on
			// whole milliseconds of exact products.
			scale := pick(millis.MaxScale, millis.MaxScale-1, 1<<30+rnd.Int64N(millis.MaxScale-1<<30))
			limits := []int64{pick(3_153_600_000, check.MaxLimit, check.MaxLimit-1, 1<<20+rnd.Int64N(check.MaxLimit-1<<20)),
				pick(check.MaxLimit, 7, 1+rnd.Int64N(check.MaxLimit))}
			if round%4 == 3 {
				// Small numbers: the direct path, where a limit of 1 puts
				// the check 1 ms before a retry one past the edge.
				scale, limits = pick(1, 7, 1000, 60_000), []int64{pick(1, 2, 10), pick(1, 3)}
			}
			r := millis.Request{ID: prefix + strconv.Itoa(round), Scale: scale, Algo: a}
			key := checkCall(b, r, 0, 0, -1).key
			var ref algo.Record
			var ok bool
			retry := int64(-1)
			for i := range 30 {
				r.Limit = limits[0]
				if rnd.IntN(4) == 0 {
					r.Limit = limits[1]
				}
				r.Hits = pick(1, r.Limit, r.Limit/2+1, rnd.Int64N(r.Limit+1))
				r.Peek = r.Hits == 0
				if a == rl.Leaky {
					r.Queue = pick(0, 1, check.MaxQueue, rnd.Int64N(check.MaxQueue+1))
					r.Queue = min(r.Queue, int64(float64(millis.MaxScale)/float64(r.Scale)*float64(r.Limit)))
					for r.Validate(0) != nil {
						r.Queue /= 2
					}
					r.MaxDelayMS = 0
					switch rnd.IntN(3) {
					case 0:
						r.MaxDelayMS = 1 + rnd.Int64N(r.Scale)
					case 1:
						// The delay bound just under the queue's room:
						// maxdelay*limit and queue*scale then differ in
						// their low limb only.
						hi, lo := bits.Mul64(uint64(r.Queue), uint64(r.Scale))
						q, _ := bits.Div64(hi, lo, uint64(r.Limit))
						r.MaxDelayMS = max(1, min(int64(q)-int64(rnd.IntN(2)), millis.MaxScale))
					}
				}
				switch {
				case retry > 0 && rnd.IntN(2) == 0:
					clock.Advance(millis.Duration(retry - int64(rnd.IntN(2)))) // at the edge, or 1 ms before
					edges++
				case rnd.IntN(3) == 0:
					clock.Advance(millis.Duration(rnd.Int64N(scale/4 + 1)))
				}
				now := clock.Now().UnixMilli()
				want, next, write := f(ref, ok, now, r)
				got, err := b.checkMS(ctx, r)
				require.NoError(t, err)
				require.Equal(t, want.Allowed, got.Allowed, "%v round %d check %d: %+v", a, round, i, r)
				require.Equal(t, want, got, "%v round %d check %d: %+v", a, round, i, r)
				if write {
					ref, ok = next, true
				}
				retry = -1
				if !got.Allowed && r.Hits <= r.Limit {
					retry = got.RetryAfterMS
				}
				if mul := float64(r.Limit) * float64(r.Scale); mul >= 1<<52 {
					slow++
				}
				if !ok {
					continue
				}
				s, err := b.conn().Do(ctx, b.conn().B().Get().Key(key).Build()).ToString()
				require.NoError(t, err)
				v, good := unpack(s, 4)
				require.True(t, good, "a record of 4 numbers")
				require.Equal(t, []int64{ref.Modified, ref.Count & (1<<32 - 1), int64(uint64(ref.Count) >> 32), ref.Created}, v,
					"%v round %d check %d: the record (TAT, remainder, its limit, created)", a, round, i)
			}
		}
		t.Logf("%v: %d checks at or just before a retry's edge, %d with limit*scale past 2^52", a, edges, slow)
		require.Positive(t, edges)
		require.Positive(t, slow)
	}
}
