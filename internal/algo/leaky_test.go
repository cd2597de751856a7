package algo_test

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func leakyReq(scale, limit, hits, queue int64) millis.Request {
	return millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Leaky, Queue: queue}
}

// TestLeakyQueue: five a second with a queue of 3: four checks at once
// wait 0, 200, 400 and 600 ms, the fifth is refused until the first has
// left.
func TestLeakyQueue(t *testing.T) {
	s := newSim(t)
	r := leakyReq(1000, 5, 1, 3)
	for i, want := range []millis.Decision{
		{Allowed: true, Count: 1, Limit: 5, Remaining: 4, ResetMS: 200},
		{Allowed: true, Count: 2, Limit: 5, Remaining: 3, ResetMS: 400, DelayMS: 200},
		{Allowed: true, Count: 3, Limit: 5, Remaining: 2, ResetMS: 600, DelayMS: 400},
		{Allowed: true, Count: 4, Limit: 5, Remaining: 1, ResetMS: 800, DelayMS: 600},
		{Count: 4, Limit: 5, Remaining: 1, ResetMS: 800, RetryAfterMS: 200},
	} {
		want.Now = t0
		assert.Equal(t, want, s.check(t0, r), "check %d", i)
	}
	assert.False(t, s.clone().check(t0+199, r).Allowed)
	d := s.check(t0+200, r)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(600), d.DelayMS, "behind three")
	// With no queue, one check each 200 ms and none in between.
	s = newSim(t)
	r.Queue = 0
	assert.True(t, s.check(t0, r).Allowed)
	assert.Equal(t, millis.Decision{Count: 1, Limit: 5, Remaining: 4, ResetMS: 1, RetryAfterMS: 1, Now: t0 + 199}, s.check(t0+199, r))
	assert.Equal(t, int64(0), s.check(t0+200, r).DelayMS)
}

func TestLeakyBoundsTheDelay(t *testing.T) {
	s := newSim(t)
	r := leakyReq(1000, 5, 1, 10)
	for range 4 {
		require.True(t, s.check(t0, r).Allowed)
	}
	// The next waits 800 ms: a bound of 799 refuses it without a place.
	r.MaxDelayMS = 799
	d := s.check(t0, r)
	assert.False(t, d.Allowed)
	assert.Equal(t, int64(1), d.RetryAfterMS, "in 1 ms the wait is 799")
	assert.Equal(t, int64(4), d.Count, "no place taken")
	r.MaxDelayMS = 800
	d = s.check(t0, r)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(800), d.DelayMS)
}

func TestLeakyFractionalInterval(t *testing.T) {
	s := newSim(t)
	r := leakyReq(1000, 3, 1, 5)
	var delays []int64
	for range 4 {
		d := s.check(t0, r)
		require.True(t, d.Allowed)
		delays = append(delays, d.DelayMS)
	}
	assert.Equal(t, []int64{0, 334, 667, 1000}, delays, "333.33 ms apart, rounded up")
}

func TestLeakyEdges(t *testing.T) {
	tests := []struct {
		name string
		r    millis.Request
		want millis.Decision
	}{
		{"limit 0 denies", leakyReq(1000, 0, 1, 3), millis.Decision{Limit: 0, RetryAfterMS: 1}},
		{"a peek of limit 0", leakyReq(1000, 0, 0, 3), millis.Decision{Allowed: true}},
		{"hits above the limit never pass", leakyReq(1000, 3, 4, 100), millis.Decision{Limit: 3, Remaining: 3, RetryAfterMS: 1}},
		{"hits up to the limit pass at once", leakyReq(1000, 3, 3, 0), millis.Decision{Allowed: true, Count: 3, Limit: 3, ResetMS: 1000}},
		{"the largest bounds", leakyReq(millis.MaxScale, check.MaxLimit, check.MaxHits, check.MaxQueue),
			millis.Decision{Allowed: true, Count: check.MaxLimit, Limit: check.MaxLimit, ResetMS: millis.MaxScale}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _, _ := algo.Leaky(algo.Record{}, false, t0, tt.r)
			tt.want.Now = t0
			assert.Equal(t, tt.want, d)
		})
	}
}

// TestPropertyLeakyModel: Leaky decides as the queue model in exact
// rationals, and the turns it hands out (now + DelayMS) are never closer
// than the hits before them take to leave.
func TestPropertyLeakyModel(t *testing.T) {
	rng := newRand(t)
	delayed := 0
	for trial := 0; trial < 300; trial++ {
		sh := shape{scale: []int64{1, 10, 1000, 60_000, 1 + rng.Int64N(5000)}[rng.IntN(5)], limit: []int64{0, 1, 3, 1 + rng.Int64N(50)}[rng.IntN(4)]}
		queue := []int64{0, 1, 3, rng.Int64N(100)}[rng.IntN(4)]
		s := newSim(t)
		var g leakyModel
		now := t0 + rng.Int64N(sh.scale)
		var lastTurn *big.Rat
		var lastHits int64
		for range 300 {
			now += randStep(rng, sh.scale) / 4
			r := leakyReq(sh.scale, sh.limit, randHits(rng, sh.limit), queue)
			if rng.IntN(10) == 0 {
				r.MaxDelayMS = 1 + rng.Int64N(2*sh.scale)
			}
			d := s.check(now, r)
			allowed, count, reset, delay := g.check(now, r)
			require.Equal(t, allowed, d.Allowed, "trial %d: %+v", trial, r)
			require.Equal(t, count, d.Count, "trial %d: %+v", trial, r)
			require.Equal(t, reset, d.ResetMS, "trial %d: %+v", trial, r)
			require.Equal(t, delay, d.DelayMS, "trial %d: %+v", trial, r)
			if r.MaxDelayMS > 0 {
				require.LessOrEqual(t, d.DelayMS, r.MaxDelayMS)
			}
			if d.Allowed && r.Hits > 0 {
				if d.DelayMS > 0 {
					delayed++
				}
				turn := new(big.Rat).Sub(g.tat, new(big.Rat).Mul(rat(r.Hits), big.NewRat(sh.scale, sh.limit)))
				if lastTurn != nil {
					gap := new(big.Rat).Sub(turn, lastTurn)
					need := new(big.Rat).Mul(rat(lastHits), big.NewRat(sh.scale, sh.limit))
					require.GreaterOrEqual(t, gap.Cmp(need), 0, "trial %d: turns %v then %v", trial, lastTurn, turn)
				}
				require.GreaterOrEqual(t, rat(now+d.DelayMS).Cmp(turn), 0, "never before its turn")
				lastTurn, lastHits = turn, r.Hits
			}
		}
	}
	assert.Greater(t, delayed, 1000)
}

// Five a second with a queue of two: three checks at once go at 0, 200
// and 400 ms; a fourth is refused until 200 ms from now.
func ExampleLeaky() {
	const now = 1_700_000_040_000
	r := millis.Request{ID: "u", Scale: 1000, Limit: 5, Hits: 1, Algo: rl.Leaky, Queue: 2}
	var st algo.Record
	ok := false
	for range 4 {
		var d millis.Decision
		d, st, _ = algo.Leaky(st, ok, now, r)
		ok = true
		fmt.Println(d.Allowed, d.DelayMS, d.Count, d.RetryAfterMS)
	}
	// Output:
	// true 0 1 0
	// true 200 2 0
	// true 400 3 0
	// false 0 3 200
}
