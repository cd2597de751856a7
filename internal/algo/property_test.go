package algo_test

import (
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

var seedFlag = flag.Uint64("algo.seed", 20261121, "seed of the property tests")

// newRand returns the seeded generator of a property test and logs its seed;
// rerun a failure with -algo.seed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	t.Logf("seed %d (rerun with -algo.seed=%d)", *seedFlag, *seedFlag)
	return rand.New(rand.NewPCG(*seedFlag, 0x5eed))
}

// shape is a random limit: scale, limit, and for Slices and Leaky their
// slices and queue (set for every algorithm; a test passes them to its
// own only).
type shape struct {
	scale, limit  int64
	slices, queue int64
}

func randShape(rng *rand.Rand) shape {
	scales := []int64{1, 2, 7, 100, 1000, 60_000, 1 + rng.Int64N(5000), millis.MaxScale}
	limits := []int64{0, 1, 2, 3, 7, 10, 1 + rng.Int64N(100), 1000, check.MaxLimit}
	slices := []int64{0, 2, 3, 10, 60, 2 + rng.Int64N(599), 600}
	queues := []int64{0, 1, 3, rng.Int64N(100), check.MaxQueue}
	return shape{scales[rng.IntN(len(scales))], limits[rng.IntN(len(limits))],
		slices[rng.IntN(len(slices))], queues[rng.IntN(len(queues))]}
}

// randHits is mostly 1, sometimes 0 (a peek), a few, or more than the limit.
func randHits(rng *rand.Rand, limit int64) int64 {
	switch n := rng.IntN(10); {
	case n < 5:
		return 1
	case n == 5:
		return 0
	case n == 6:
		return limit + 1
	default:
		return 1 + rng.Int64N(max(1, min(limit, check.MaxHits)))
	}
}

// randStep is how far the clock moves: mostly a small part of the scale,
// sometimes across a window or more.
func randStep(rng *rand.Rand, scale int64) int64 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return rng.Int64N(2*scale + 1)
	default:
		return rng.Int64N(max(1, scale/8) + 1)
	}
}

func TestPropertyRetryAfterIsExact(t *testing.T) {
	rng := newRand(t)
	for _, a := range []rl.Algo{rl.Sliding, rl.Token, rl.Slices, rl.Leaky} {
		t.Run(a.String(), func(t *testing.T) {
			checked := 0
			for trial := 0; trial < 3000; trial++ {
				sh := randShape(rng)
				s := newSim(t)
				now := t0 + rng.Int64N(sh.scale)
				var r millis.Request
				var d millis.Decision
				for range 1 + rng.IntN(30) {
					now += randStep(rng, sh.scale)
					r = millis.Request{ID: "u", Scale: sh.scale, Limit: sh.limit, Hits: randHits(rng, sh.limit), Algo: a}
					r.Slices, r.Queue = sh.slices, sh.queue
					d = s.check(now, r)
				}
				if d.Allowed {
					assert.Zero(t, d.RetryAfterMS, "allowed: %+v -> %+v", r, d)
					continue
				}
				if r.Hits > r.Limit {
					assert.Equal(t, max(d.ResetMS, 1), d.RetryAfterMS, "never passes: %+v -> %+v", r, d)
					continue
				}
				require.Positive(t, d.RetryAfterMS, "%+v -> %+v", r, d)
				checked++
				at := s.clone().check(now+d.RetryAfterMS, r)
				assert.True(t, at.Allowed, "trial %d: %+v at now+%d: %+v", trial, r, d.RetryAfterMS, at)
				early := s.clone().check(now+d.RetryAfterMS-1, r)
				assert.False(t, early.Allowed, "trial %d: %+v at now+%d-1: %+v", trial, r, d.RetryAfterMS, early)
			}
			t.Logf("%d denials checked", checked)
			assert.Greater(t, checked, 500)
		})
	}
}

// TestPropertyRemainingIsExact: Remaining is exactly the hits a check
// could be allowed now. (Not for Leaky, whose Remaining is the rate's room
// in a window, while its queue decides who waits.)
func TestPropertyRemainingIsExact(t *testing.T) {
	rng := newRand(t)
	for _, a := range []rl.Algo{rl.Sliding, rl.Token, rl.Slices} {
		t.Run(a.String(), func(t *testing.T) {
			for trial := 0; trial < 3000; trial++ {
				sh := randShape(rng)
				s := newSim(t)
				now := t0 + rng.Int64N(sh.scale)
				for range 1 + rng.IntN(30) {
					now += randStep(rng, sh.scale)
					r := millis.Request{ID: "u", Scale: sh.scale, Limit: sh.limit, Hits: randHits(rng, sh.limit), Algo: a, Slices: sh.slices}
					s.check(now, r)
				}
				peek := millis.Request{ID: "u", Scale: sh.scale, Limit: sh.limit, Algo: a, Slices: sh.slices}
				before := s.clone()
				d := s.check(now, peek)
				require.Equal(t, before.recs, s.recs, "a peek writes nothing")
				assert.Equal(t, max(0, d.Limit-d.Count), d.Remaining)
				if d.Remaining > 0 {
					r := peek
					r.Hits = d.Remaining
					assert.True(t, s.clone().check(now, r).Allowed, "remaining %d hits pass: %+v", d.Remaining, d)
				}
				if d.Remaining < check.MaxHits {
					r := peek
					r.Hits = d.Remaining + 1
					assert.False(t, s.clone().check(now, r).Allowed, "remaining+1 hits fail: %+v", d)
				}
			}
		})
	}
}

func TestPropertySlidingAlignedWindow(t *testing.T) {
	rng := newRand(t)
	for trial := 0; trial < 250; trial++ {
		sh := shape{scale: []int64{1, 10, 1000, 60_000}[rng.IntN(4)], limit: 1 + rng.Int64N(50)}
		s := newSim(t)
		now := t0 + rng.Int64N(sh.scale)
		allowed := map[int64]int64{} // hits allowed per aligned window
		for range 400 {
			now += randStep(rng, sh.scale)
			r := millis.Request{ID: "u", Scale: sh.scale, Limit: sh.limit, Hits: randHits(rng, sh.limit), Algo: rl.Sliding}
			b := algo.Bucket(now, sh.scale)
			var p, c int64
			if rec, ok := s.recs[b-1]; ok {
				p = rec.Count
			}
			if rec, ok := s.recs[b]; ok {
				c = rec.Count
			}
			d := s.check(now, r)
			wantAllowed, wantCount := slidingModel(p, c, now-b*sh.scale, sh.scale, sh.limit, r.Hits)
			require.Equal(t, wantAllowed, d.Allowed, "exact model: %+v p=%d c=%d", r, p, c)
			require.Equal(t, wantCount, d.Count, "exact model: %+v p=%d c=%d", r, p, c)
			if d.Allowed {
				allowed[b] += r.Hits
			}
		}
		for b, n := range allowed {
			assert.LessOrEqual(t, n, sh.limit, "window %d of %+v", b, sh)
		}
	}
}

func TestPropertyTokenBound(t *testing.T) {
	rng := newRand(t)
	tight := 0
	for trial := 0; trial < 120; trial++ {
		sh := shape{scale: []int64{1, 10, 1000, 60_000, 1 + rng.Int64N(5000)}[rng.IntN(5)], limit: 1 + rng.Int64N(50)}
		s := newSim(t)
		var g gcraModel
		now := t0 + rng.Int64N(sh.scale)
		type hit struct{ at, n int64 }
		var allowed []hit
		for range 300 {
			now += randStep(rng, sh.scale) / 2
			r := millis.Request{ID: "u", Scale: sh.scale, Limit: sh.limit, Hits: randHits(rng, sh.limit), Algo: rl.Token}
			d := s.check(now, r)
			wantAllowed, wantCount, wantReset := g.check(now, sh.scale, sh.limit, r.Hits)
			require.Equal(t, wantAllowed, d.Allowed, "exact model: %+v", r)
			require.Equal(t, wantCount, d.Count, "exact model: %+v", r)
			require.Equal(t, wantReset, d.ResetMS, "exact model: %+v", r)
			if d.Allowed && r.Hits > 0 {
				allowed = append(allowed, hit{now, r.Hits})
			}
		}
		// In every interval [allowed[i].at, allowed[j].at]:
		// hits <= limit + elapsed/scale*limit, i.e. hits*S <= limit*(S+elapsed).
		for i := range allowed {
			var sum int64
			for j := i; j < len(allowed); j++ {
				sum += allowed[j].n
				elapsed := allowed[j].at - allowed[i].at
				bound := sh.limit * (sh.scale + elapsed) // small shapes: no overflow
				got := sum * sh.scale
				require.LessOrEqual(t, got, bound, "%+v: %d hits in [%d, %d]", sh, sum, allowed[i].at, allowed[j].at)
				if got == bound {
					tight++
				}
			}
		}
	}
	t.Logf("%d intervals reached the bound exactly", tight)
	assert.Positive(t, tight, "the bound is reached, not just respected")
}
