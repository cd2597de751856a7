package redisbackend_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// model is the reference: the records of every (id, algo, scale, bucket) in
// a map, decided by the pure functions of package algo, as the embedded
// limiter's store does.
type model struct {
	recs map[mkey]algo.Record
	logs map[mkey]*algo.Log
}

type mkey struct {
	id            string
	a             rl.Algo
	scale, bucket int64
	slices        int64
}

func (m *model) check(now int64, r millis.Request) millis.Decision {
	if r.Algo == rl.Slices {
		n, _, k := algo.SliceOf(now, r)
		var list []algo.Slice
		for key, rec := range m.recs {
			if key.id == r.ID && key.a == rl.Slices && key.scale == r.Scale && key.slices == n {
				_, hits := algo.SlicesOfRecord(rec)
				list = append(list, algo.Slice{Num: key.bucket, Hits: hits})
			}
		}
		slices.SortFunc(list, func(a, b algo.Slice) int { return cmp.Compare(a.Num, b.Num) })
		d := algo.SlicesCheck(list, now, r)
		if d.Allowed && r.Hits > 0 {
			key := mkey{r.ID, rl.Slices, r.Scale, k, n}
			_, hits := algo.SlicesOfRecord(m.recs[key])
			m.recs[key] = algo.SlicesRecord(n, hits+r.Hits, now, now)
		}
		return d
	}
	if r.Algo == rl.Log {
		k := mkey{r.ID, r.Algo, r.Scale, 0, 0}
		if m.logs[k] == nil {
			m.logs[k] = new(algo.Log)
		}
		return algo.LogCheck(m.logs[k], now, r)
	}
	cur := mkey{r.ID, r.Algo, r.Scale, 0, 0}
	prev := cur
	if r.Algo != rl.Token && r.Algo != rl.Leaky {
		cur.bucket = algo.Bucket(now, r.Scale)
		prev.bucket = cur.bucket - 1
	}
	c, ok := m.recs[cur]
	var p algo.Record
	var pok bool
	if r.Algo == rl.Sliding {
		p, pok = m.recs[prev]
	}
	d, next, write := algo.Check(c, ok, p, pok, now, r)
	if write {
		m.recs[cur] = next
	}
	d.Now = now
	return d
}

// profile is a small set of (scale, limit) pairs that one run hits again and
// again, so that windows fill, slide and refill; the pairs favour the edges of
// the bounds.
type profile struct{ scales, limits []int64 }

func randomProfile(rnd *rand.Rand) profile {
	pick := func(xs ...int64) int64 { return xs[rnd.IntN(len(xs))] }
	var p profile
	for range 2 {
		p.scales = append(p.scales, pick(1, 7, 1000, 60_000, millis.MaxScale, millis.MaxScale-1, 1+rnd.Int64N(millis.MaxScale)))
		p.limits = append(p.limits, pick(0, 1, 3, 10, 1000, check.MaxLimit, check.MaxLimit-1, 1+rnd.Int64N(check.MaxLimit)))
	}
	return p
}

// randomRequest draws a request of the profile, with hits near the limit's
// fractions so that both allowing and denying happen.
func (p profile) randomRequest(rnd *rand.Rand) millis.Request {
	r := millis.Request{
		ID:    idOf(int64(rnd.IntN(2))),
		Algo:  check.Algos[rnd.IntN(len(check.Algos))],
		Scale: p.scales[rnd.IntN(len(p.scales))],
		Limit: p.limits[rnd.IntN(len(p.limits))],
	}
	switch r.Algo {
	case rl.Log:
		r.Limit = min(r.Limit, check.MaxLogLimit)
	case rl.Slices:
		r.Slices = []int64{0, 2, 7, 600}[rnd.IntN(4)]
	case rl.Leaky:
		// A queue that drains within ten years (the bound Validate keeps).
		q := []int64{0, 1, 3, check.MaxQueue, rnd.Int64N(check.MaxQueue + 1)}[rnd.IntN(5)]
		if r.Limit > 0 {
			q = min(q, int64(float64(millis.MaxScale)/float64(r.Scale)*float64(r.Limit)))
		}
		r.Queue = q
		for r.Validate(0) != nil {
			r.Queue /= 2
		}
		if rnd.IntN(8) == 0 {
			r.MaxDelayMS = 1 + rnd.Int64N(r.Scale)
		}
	}
	switch rnd.IntN(8) {
	case 0:
		r.Hits = 0
	case 1:
		r.Hits = r.Limit
	case 2:
		r.Hits = min(r.Limit+1, check.MaxHits)
	case 3:
		r.Hits = rnd.Int64N(check.MaxHits + 1)
	case 4, 5:
		r.Hits = rnd.Int64N(r.Limit/2 + 1)
	default:
		r.Hits = 1 + rnd.Int64N(2)
	}
	r.Peek = r.Hits == 0
	return r
}

// idOf keeps ids short in the table but of arbitrary bytes.
func idOf(x int64) string { return string([]byte{'{', byte(x), '}', 0xff}) }

// TestMatchesAlgo drives the backend and the reference with the same seeded
// random requests, single and batched, with the clock jumping by small and
// huge steps, and wants every decision equal: the Lua mirrors of algo's
// sliding window and GCRA, at the bounds where products pass 2^53, and the
// cache of denials, which decides from the state Redis last showed. Once on
// the defaults, once without the cache and with fixed windows counted by
// their script.
func TestMatchesAlgo(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	srv := redistest.Start(t)
	for _, mode := range []string{"single", "batch", "single-script-nocache", "batch-script-nocache"} {
		t.Run(mode, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(seed), 0))
			clock := limitertest.NewClock(limitertest.T0)
			var local atomic.Int64
			cfg := redisbackend.Config{URL: srv.URL(), Prefix: "m" + mode, Clock: clock.Now, Timeout: 5 * time.Second,
				OnLocalDenials: func(n int) { local.Add(int64(n)) }}
			cached := !strings.HasSuffix(mode, "-script-nocache")
			if !cached {
				cfg.Deadlines, cfg.DenyCache = true, -1
			}
			b, err := redisbackend.New(cfg)
			require.NoError(t, err)
			defer b.Close()
			ref := &model{recs: map[mkey]algo.Record{}, logs: map[mkey]*algo.Log{}}
			ctx := context.Background()
			steps := 3000
			if testing.Short() {
				steps = 500
			}
			var prof profile
			seen := map[rl.Algo][2]int{} // denied, allowed
			for i := 0; i < steps; {
				if i == 0 {
					prof = randomProfile(rnd)
				}
				switch rnd.IntN(10) {
				case 0:
					clock.Advance(time.Duration(rnd.Int64N(prof.scales[0]+1)) * time.Millisecond)
				case 1:
					clock.Advance(time.Duration(rnd.Int64N(prof.scales[1]/4+1)) * time.Millisecond)
				case 2:
					clock.Advance(time.Duration(rnd.Int64N(2000)) * time.Millisecond)
				case 3:
					clock.Advance(time.Duration(1) * time.Millisecond)
				}
				n := 1
				if strings.HasPrefix(mode, "batch") {
					n = 1 + rnd.IntN(8)
				}
				rs := make([]millis.Request, n)
				for j := range rs {
					rs[j] = prof.randomRequest(rnd)
				}
				var got []millis.Decision
				if n > 1 || strings.HasPrefix(mode, "batch") {
					got, err = checkRatesMS(ctx, b, rs)
				} else {
					var d millis.Decision
					d, err = checkMS(ctx, b, rs[0])
					got = []millis.Decision{d}
				}
				require.NoError(t, err, "step %d", i)
				for j, r := range rs {
					want := ref.check(clock.Now().UnixMilli(), r)
					x := seen[r.Algo]
					x[b2i(want.Allowed)]++
					seen[r.Algo] = x
					if !assert.Equal(t, want, got[j], "step %d item %d at %d: %+v", i, j, clock.Now().UnixMilli(), r) {
						t.FailNow()
					}
				}
				i += n
				if i/100 != (i-n)/100 {
					prof = randomProfile(rnd)
				}
			}
			for _, a := range check.Algos {
				assert.Positive(t, seen[a][0], "%v: some checks denied", a)
				assert.Positive(t, seen[a][1], "%v: some checks allowed", a)
			}
			t.Logf("denied/allowed per algo: %v; %d denied by the cache", seen, local.Load())
			if cached {
				assert.Positive(t, local.Load(), "the cache of denials answered some")
			} else {
				assert.Zero(t, local.Load())
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFixedCounterSaturates seeds a fixed window's counter near 2^63 (no
// sequence of checks gets there in a test's time) and wants what algo.Fixed
// answers: the sum saturates at 2^63-1 instead of failing or wrapping, with
// the counter (INCRBY) and with Config.Deadlines. The cache of denials is
// off, so every check reaches Redis.
func TestFixedCounterSaturates(t *testing.T) {
	srv := redistest.Start(t)
	for _, script := range []bool{false, true} {
		t.Run(map[bool]string{false: "counter", true: "script"}[script], func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.T0)
			prefix := "sat" + strconv.FormatBool(script)
			b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Prefix: prefix, Clock: clock.Now,
				Timeout: 5 * time.Second, Deadlines: script, DenyCache: -1})
			require.NoError(t, err)
			defer b.Close()
			tag := prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte("big")) + "}:"
			start := int64(9223372036854775807 - check.MaxHits - 1) // one MaxHits fits, the next overflows
			now := strconv.FormatInt(limitertest.T0.UnixMilli(), 10)
			// The window's counter, and its index entry.
			_, err = srv.Do("SET", tag+"f:1000:"+strconv.FormatInt(limitertest.T0.UnixMilli()/1000, 10), strconv.FormatInt(start, 10))
			require.NoError(t, err)
			_, err = srv.Do("HSET", tag+"i", "f:1000", now)
			require.NoError(t, err)
			rec := algo.Record{Count: start, Created: limitertest.T0.UnixMilli(), Modified: limitertest.T0.UnixMilli()}
			r := millis.Request{ID: "big", Scale: 1000, Limit: check.MaxLimit, Hits: check.MaxHits}
			for i := range 3 {
				want, next, _ := algo.Fixed(rec, true, clock.Now().UnixMilli(), r)
				rec = next
				got, err := checkMS(context.Background(), b, r)
				require.NoError(t, err)
				assert.Equal(t, want, got, "check %d", i)
			}
			assert.Equal(t, int64(9223372036854775807), rec.Count, "the reference saturated too")
			bs, err := b.Buckets(context.Background(), "big")
			require.NoError(t, err)
			require.Len(t, bs, 1)
			assert.Equal(t, rec.Count, bs[0].Count, "the stored counter")
		})
	}
}

// checkMS is l.CheckRate in milliseconds, to compare with package algo.
func checkMS(ctx context.Context, l rl.Limiter, r millis.Request) (millis.Decision, error) {
	d, err := l.CheckRate(ctx, r.Public())
	return millis.OfDecision(d), err
}

// checkRatesMS is l.CheckRates in milliseconds.
func checkRatesMS(ctx context.Context, l rl.Limiter, rs []millis.Request) ([]millis.Decision, error) {
	pub := make([]rl.Request, len(rs))
	for i, r := range rs {
		pub[i] = r.Public()
	}
	ds, err := l.CheckRates(ctx, pub)
	out := make([]millis.Decision, len(ds))
	for i, d := range ds {
		out[i] = millis.OfDecision(d)
	}
	return out, err
}
